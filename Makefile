# egoroll developer entry points. `make test` is what CI runs (.ci/run).
PYTHON ?= python3

.PHONY: setup test demo lint bench clean

setup:  ## venv with pinned ROS 2 wheels + colcon build of both packages (idempotent)
	@$(PYTHON) tools/bootstrap.py

test: setup  ## lint + unit + integration tests against the installed packages
	@tools/run_tests.sh

demo: setup  ## the main job on the built-in simulated robot
	@tools/in_env.sh egoroll demo $(ARGS)

lint: setup
	@tools/in_env.sh ruff check .

bench: setup
	@tools/in_env.sh python benchmarks/run_all.py

clean:
	rm -rf build install log .venv
