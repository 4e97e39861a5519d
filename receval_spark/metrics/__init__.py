"""Metric families: per-user tables and their aggregates."""
