"""Spark side: session factory and pinned-snapshot views."""
