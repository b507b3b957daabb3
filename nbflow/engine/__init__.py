"""The engine: schedules nodes on anyio/asyncio, enforces states, publishes events. No UI imports."""
