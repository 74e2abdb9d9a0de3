"""Policy backends (found through the ``egoroll_ros.policies`` entry-point group)."""
