"""pymem as LangGraph's long-term memory: `PymemStore`, a LangGraph `BaseStore` (optional extra
`pymem-pg[langgraph]`).

    from pymem import Context, Store
    from pymem.langgraph import PymemStore

    with Store.open() as store:
        lg_store = PymemStore(store.bind(Context(tenant="acme", actor="assistant")))
        graph = builder.compile(store=lg_store)

How namespaces map onto pymem's scope is described in pymem.langgraph.namespaces.
"""

from .store import KIND, PymemStore

__all__ = ["PymemStore", "KIND"]
