"""Typed errors shared by every part of egoroll."""


class EgorollError(Exception):
    """Base class of every error egoroll raises on purpose."""


class ConfigError(EgorollError):
    """A parameter or configuration file is invalid; the message names the parameter."""


class CheckpointError(EgorollError):
    """A policy checkpoint is missing, malformed, or does not match the configuration."""


class RobotModelError(EgorollError):
    """A robot description (URDF) is missing or malformed."""


class TrajectoryError(EgorollError):
    """A trajectory or action chunk is malformed.

    Attributes:
        code: a stable machine-readable reason (for the executor, one of the
            ``ExecuteTrajectory`` result constants' names, e.g. ``'NON_FINITE'``).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InputError(EgorollError):
    """A live input (image, joint state, Quest message) is missing, stale or malformed."""


class BagError(EgorollError):
    """A rosbag is missing, corrupt, empty, or lacks what the configuration needs."""
