"""Tracing in a real ipykernel: every way of running (await, blocking on a worker thread, background, batch)."""

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

SETUP = """
import logging, asyncio, nbflow as nf
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

problems = []
class Catch(logging.Handler):
    def emit(self, record):
        problems.append(record.getMessage())
logging.getLogger("opentelemetry").addHandler(Catch(level=logging.WARNING))

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
nf.config.trace = provider

flow = nf.Flow("k")

@flow.node
async def fetch(q: str) -> str:
    await asyncio.sleep(0.01)
    nf.usage(model="m", input_tokens=len(q), output_tokens=1)
    return q

@flow.node
def shout(fetch: str) -> str:
    return fetch.upper()

def tree():
    spans = exporter.get_finished_spans()
    exporter.clear()
    roots = [s for s in spans if s.parent is None]
    ok = all(s.parent is not None and s.parent.span_id in {r.context.span_id for r in roots} for s in spans if s.parent)
    return len(roots), sorted(s.name for s in spans if s.parent), ok
"""


def test_tracing_in_a_notebook_every_way_of_running():
    nb = run_cells(
        [
            SETUP,
            "run = await flow.arun(q='a', show=False); print(tree())",
            "run = flow.run(q='bb', show=False); print(tree())",
            "h = flow.start(q='ccc', show=False); r = await h; print(tree())",
            "df = flow.batch([{'q': 'x'}, {'q': 'yy'}], progress=False); print(tree())",
            "print(trace.get_current_span() is trace.INVALID_SPAN, problems)",
        ],
        timeout=120,
    )
    texts = [output_text(c).strip() for c in nb.cells]
    one = "(1, ['node fetch', 'node shout'], True)"
    assert texts[1] == one, texts[1]
    assert texts[2] == one, texts[2]
    assert texts[3] == one, texts[3]
    assert texts[4] == "(2, ['node fetch', 'node fetch', 'node shout', 'node shout'], True)", texts[4]
    assert texts[5] == "True []", texts[5]  # nothing left current in the kernel, no context warnings
