"""The tests run against the INSTALLED package, which must carry every file it needs."""

from pathlib import Path
import re

from ament_index_python.packages import get_package_prefix, get_package_share_directory
import pytest

import egoroll_ros
from egoroll_ros.testing import executable_path

SETUP_PY = Path(__file__).resolve().parents[2] / 'setup.py'


def test_tests_import_the_installed_package_not_the_source_tree():
    prefix = Path(get_package_prefix('egoroll_ros')).resolve()
    assert Path(egoroll_ros.__file__).resolve().is_relative_to(prefix)


def test_every_console_script_in_setup_py_is_installed():
    scripts = re.findall(r"'(\w+) = egoroll_ros\.[\w.]+:main'", SETUP_PY.read_text())
    assert {'egoroll', 'trajectory_server', 'safety_gate', 'policy_node', 'sim_robot',
            'sim_camera'} <= set(scripts)
    for name in scripts:
        assert Path(executable_path(name)).is_file()


def test_package_manifest_and_ament_index_entry_are_installed():
    share = Path(get_package_share_directory('egoroll_ros'))
    assert (share / 'package.xml').is_file()
    assert 'egoroll_ros' in (share / 'package.xml').read_text()


def test_interfaces_expose_documented_constants():
    from egoroll_interfaces.action import ExecuteTrajectory
    from egoroll_interfaces.msg import RolloutStatus, Violation

    codes = {name: getattr(ExecuteTrajectory.Result, name) for name in dir(
        ExecuteTrajectory.Result) if name.isupper() and not name.startswith('_')}
    for needed in ('SUCCESSFUL', 'INVALID_GOAL', 'INVALID_JOINTS', 'PREEMPTED', 'CANCELED',
                   'PATH_TOLERANCE_VIOLATED', 'GOAL_TOLERANCE_VIOLATED', 'STALE_STATE',
                   'OLD_SEQUENCE', 'COMMAND_TIMEOUT', 'TRAJECTORY_IN_PAST', 'NON_FINITE'):
        assert needed in codes
    values = [v for v in codes.values() if isinstance(v, int)]
    assert len(values) == len(set(values)), 'result codes must be distinct'
    assert RolloutStatus.STATE_RUNNING != RolloutStatus.STATE_READY
    assert Violation.WHOLE_CHUNK == -1


@pytest.mark.parametrize('missing', ['nonexistent_script'])
def test_executable_path_names_a_missing_script(missing):
    with pytest.raises(FileNotFoundError, match=missing):
        executable_path(missing)
