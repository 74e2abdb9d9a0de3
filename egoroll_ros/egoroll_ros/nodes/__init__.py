"""rclpy nodes: thin shells around the cores, one node per file, one console script each."""
