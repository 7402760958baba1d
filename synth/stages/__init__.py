"""Pipeline stages: plain functions with typed inputs and outputs."""
