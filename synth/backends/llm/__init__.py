"""LLM session planner through OpenAI-compatible chat endpoints (``openai`` client)."""

from .client import EndpointError, check_endpoint
from .planner import LLMPlanner

__all__ = ["EndpointError", "LLMPlanner", "check_endpoint"]
