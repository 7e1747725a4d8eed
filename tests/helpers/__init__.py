"""Test helpers: data, reference models and database utilities shared by the test modules."""
