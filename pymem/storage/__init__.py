"""Storage: opening the store and the memory verbs (upsert_many, search, get, get_many, delete_many,
describe_store, health), chunk parsing, validation, idempotency, import and export."""
