"""Adapters that bring a toolseam registry, and its contract, into agent frameworks.

Each module is an optional extra and imports its framework only when imported itself:
`toolseam.integrations.pydantic_ai` (``toolseam[pydantic-ai]``),
`toolseam.integrations.openai_agents` (``toolseam[openai-agents]``),
`toolseam.integrations.langchain` (``toolseam[langchain]``),
`toolseam.integrations.google_adk` (``toolseam[google-adk]``) and
`toolseam.integrations.crewai` (``toolseam[crewai]``). See contract §10.
"""
