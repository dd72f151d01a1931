"""Persistence: SQLAlchemy 2.x models, repositories and Alembic migrations.

The only package that imports sqlalchemy. Events are append-only here and in database triggers
(SQLite and PostgreSQL).
"""
