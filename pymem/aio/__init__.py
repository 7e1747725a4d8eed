"""pymem for asyncio: the store on psycopg's async pool, and the verbs as coroutines.

    from pymem import aio

    store = await aio.Store.open()
    memories = store.bind(tenant="acme", actor="u1")
    await aio.admit(memories, "the user prefers metric units", {"origin": "user_asserted"})
    result = await aio.recall(memories, "which units?")
    await store.close()

`Store` mirrors `pymem.Store`, its `bind` gives `Memories`, whose storage verbs (upsert_many,
search, get, get_many, list_chunks, delete_many, add, get_row, health) are coroutines; the
module's functions are the library's verbs (admit and the quarantine's verbs, recall, deliver,
sessions, supersede and erase, lessons, shared facts) awaited. Each runs the sync verb's own code,
so its arguments, results, errors and transaction are the same; `conn=` joins a caller's
`psycopg.AsyncConnection`.
Needs the `async` extra (the greenlet package): pip install 'pymem-pg[async]'.
"""

from .store import AsyncConn, Memories, OffLoopEmbedder, Store
from .verbs import (
    admit,
    deliver,
    deliver_with_lessons,
    end_session,
    erase,
    erase_session,
    file_lesson,
    get_quarantined,
    lessons_for_task,
    list_lessons,
    list_quarantined,
    list_sessions,
    publish,
    recall,
    reject_quarantined,
    release_quarantined,
    start_session,
    subscribe,
    supersede,
)

__all__ = [
    # opening the store, binding a context
    "Store", "Memories", "AsyncConn", "OffLoopEmbedder",
    # the library's verbs, awaited
    "admit", "list_quarantined", "get_quarantined", "release_quarantined", "reject_quarantined",
    "recall", "deliver", "start_session", "end_session", "supersede", "erase", "erase_session",
    "list_sessions", "file_lesson", "list_lessons", "lessons_for_task", "deliver_with_lessons", "publish",
    "subscribe",
]
