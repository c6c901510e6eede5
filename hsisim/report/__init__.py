"""Presentation: terminal tables (and, later, figures and report.md)."""
