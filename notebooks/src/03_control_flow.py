# %% [markdown]
# # Control flow: route, merge, map, loop, sub-flow
# A support bot: classify a question, route it to the right answerer, merge the answers; then a map
# over documents, a refine loop with a cap, and a sub-flow.

# %%
import asyncio

import nbflow as nf

support = nf.Flow("support")


@support.node
def classify(question: str) -> str:
    q = question.lower()
    return "billing" if "invoice" in q or "refund" in q else "tech" if "error" in q else "other"


@support.router(branches=["billing", "tech", "other"])
def route(classify: str) -> str:
    return classify


@support.node(branch="route.billing")
async def billing_answer(question: str) -> str:
    await asyncio.sleep(0.01)  # an LLM call
    return "Refunds take 5 days."


@support.node(branch="route.tech")
async def tech_answer(question: str) -> str:
    await asyncio.sleep(0.01)
    return "Try turning it off and on again."


@support.node(branch="route.other")
def fallback(question: str) -> str:
    return "A human will get back to you."


@support.node(inputs={"answer": nf.first_of("billing_answer", "tech_answer", "fallback")})
def reply(answer: str, question: str) -> str:
    return f"Q: {question}\nA: {answer}"


support

# %%
run = support.run(question="Where is my refund?")
run

# %%
# NBVAL_CHECK_OUTPUT
print(run["reply"])
for name, rec in run.nodes.items():
    print(f"{name:15} {rec.status.value:10} {rec.skip_reason or ''}")

# %% [markdown]
# ## Map over documents, keeping going when one fails

# %%
docs_flow = nf.Flow("docs")


@docs_flow.node
def documents() -> list[str]:
    return ["Rayleigh scattering makes the sky blue.", "", "Chlorophyll makes leaves green."]


@docs_flow.map(over="documents", concurrency=2, errors="continue")
async def summarize(documents: str) -> str:
    if not documents:
        raise ValueError("empty document")
    await asyncio.sleep(0.01)
    return documents.split(" makes ")[0]


# %%
# NBVAL_CHECK_OUTPUT
run = docs_flow.run()
print(run["summarize"])
for item in run.nodes["summarize"].items:
    print(item.index, item.status.value, item.error)

# %% [markdown]
# ## A refine loop with a cap

# %%
# NBVAL_CHECK_OUTPUT
refine_flow = nf.Flow("refine")


@refine_flow.loop(feed="draft", until=lambda d: len(d) >= 80, max_iterations=3)
def refine(draft: str) -> str:
    return draft + " (more detail)"


run = refine_flow.run(draft="Short answer.")
print(run["refine"])
print("iterations:", len(run.nodes["refine"].iterations), "| hit the cap:", run.nodes["refine"].capped)

# %% [markdown]
# ## A sub-flow as a node (and a map of it)

# %%
clean_and_cut = nf.Flow("clean_and_cut")


@clean_and_cut.node
def clean(text: str) -> str:
    return " ".join(text.split())


@clean_and_cut.node
def cut(clean: str, words: int = 3) -> str:
    return " ".join(clean.split()[:words])


report = nf.Flow("report")
report.add(clean_and_cut, name="headline", inputs={"text": "title"}, output="cut")
report.add(clean_and_cut, name="bullets", inputs={"text": "notes"}, output="cut", map=nf.Map("text"))


@report.node
def render(headline: str, bullets: list[str]) -> str:
    return headline.upper() + "\n" + "\n".join(f"- {b}" for b in bullets)


report

# %%
# NBVAL_CHECK_OUTPUT
run = report.run(title="  the   quarterly   numbers are in ", notes=["revenue  up a lot", "costs   down a bit"])
print(run["render"])
print(run["headline.clean"])

# %%
# NBVAL_CHECK_OUTPUT
run.to_frame()[["status"]]
