"""The schema revision the code expects, importable without SQLAlchemy."""

HEAD_REVISION = "0022"
"""The Alembic revision this version of the code expects."""
