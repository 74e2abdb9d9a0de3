"""Pure cores of egoroll: numpy/torch only, no rclpy and no ROS message types."""
