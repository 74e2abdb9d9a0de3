"""Helpers for the rclpy shells: parameters, message conversion, node entry points."""
