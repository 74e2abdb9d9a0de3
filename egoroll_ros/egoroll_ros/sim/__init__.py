"""The simulated stand-ins: the demo arm (SimArm), the camera renderer and the demo reach task.

Depends on the pure cores only; the nodes that publish them are in :mod:`egoroll_ros.nodes`.
"""
