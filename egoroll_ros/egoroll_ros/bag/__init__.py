"""Recorded episodes: open and validate rosbags, replay them live, evaluate policies offline."""
