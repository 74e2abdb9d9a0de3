# egoroll developer entry points. `make test` is what CI runs (.ci/run).
PYTHON ?= python3

.PHONY: setup test demo lint bench clean

setup:  ## venv with pinned ROS 2 wheels + colcon build of both packages (idempotent)
	@$(PYTHON) tools/bootstrap.py

test: setup  ## lint + unit + integration tests against the rebuilt install; ARGS="-k gate": a subset
	@EGOROLL_SKIP_BUILD=1 tools/run_tests.sh $(ARGS)

demo: setup  ## the main job on the built-in simulated robot
	@tools/in_env.sh egoroll demo $(ARGS)

lint: setup  ## ruff over the repository
	@tools/in_env.sh ruff check .

bench: setup  ## every benchmarks/bench_*.py in turn; ARGS="--only gate" for some
	@tools/in_env.sh python benchmarks/run_all.py $(ARGS)

clean:
	rm -rf build install log .venv
