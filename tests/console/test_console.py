"""The console (issue 34) in headless Chromium against a local stack holding what ``./dev demo`` makes (the
example documents in a store ``demo``, a failed file, Ada's memories, a conversation with memory and file_search):
sign in by keyboard; see the files and a failed file's error; search and see both legs' scores; open a user's
memories, edit one and see its history; purge a scope after typing it; open a response and see what was recalled;
the operator's page; a second tenant's key sees none of the first's; a phone's width, labels and contrast. Every
number the page shows is checked against what the API answers for the same call."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import openai
import pytest
from playwright.sync_api import expect

from chalicelib.access import FULL, Access
from chalicelib.store import api_keys, drop_errors
from chalicelib.store.db import connect
from engram_cli import demo_memory
from tests.fakes.chat_server import call, text, tool_calls

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"
TENANT, OTHER = "acme", "globex"
SEARCH = "how are rare words weighted?"
EDITED = "I go hiking most weekends, usually in Sintra."


def _key(settings, tenant: str, grants: Access | None = None) -> str:
    with connect(settings) as conn:
        return api_keys.create_key(conn, tenant, grants=grants)[1]


@pytest.fixture(scope="module")
def stack(server, api_settings, fake):
    """What the demo holds, made through the API as a client would: ``{"operator", "full", "other" (keys),
    "store", "files" ({name: id}), "conversation", "responses" ([ids]), "http" (an httpx client as the operator)}``."""
    operator = _key(api_settings, TENANT, Access({**FULL.permissions, "operations": "write"}))
    client = openai.OpenAI(base_url=server.url, api_key=operator, max_retries=0, timeout=60)
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {operator}"}, timeout=60)
    store = client.vector_stores.create(name="demo")
    files = {}
    for path in sorted(EXAMPLES.iterdir()):
        files[path.name] = client.vector_stores.files.upload_and_poll(vector_store_id=store.id,
                                                                      file=(path.name, path.read_bytes())).id
    broken = client.files.create(file=("scan.pdf", b"%PDF-1.4 a scan without a text layer"), purpose="assistants")
    assert client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=broken.id).status == "failed"
    files["scan.pdf"] = broken.id
    for user, texts in ((demo_memory.USER, demo_memory.MEMORIES),
                        ("grace", ("I'm Grace. I work nights at the harbour.", "I keep bees."))):
        added = http.post("/memories", json={"user_id": user, "infer": False,
                                             "messages": [{"role": "user", "content": t} for t in texts]})
        assert added.status_code == 200, added.text
    conversation = client.conversations.create(metadata={"topic": "demo"})
    memory = {"memory": {"user_id": demo_memory.USER, "top_k": 2, "score_threshold": 0.0}}
    fake.push(text("A vegetable curry: you love cooking Indian food."))
    first = client.responses.create(model="demo-model", input="What could I cook for dinner tonight?",
                                    conversation=conversation.id, extra_body=memory)
    fake.push(tool_calls(call("file_search", {"query": SEARCH})),
              text(f"Rare words weigh more than common ones. <|{files['bm25.txt']}|>"))
    second = client.responses.create(model="demo-model", input="How are rare words weighted?",
                                     conversation=conversation.id, extra_body=memory,
                                     tools=[{"type": "file_search", "vector_store_ids": [store.id]}])
    assert second.output_text.startswith("Rare words")
    with connect(api_settings) as conn:
        drop_errors.record(conn, tenant_id=TENANT, bucket="engram-drop", key=f"{TENANT}/demo/notes.txt.engram.json",
                           event="ObjectCreated:Put|1", code="invalid_sidecar",
                           message="The sidecar is not a JSON object of attributes.")
    yield {"operator": operator, "full": _key(api_settings, TENANT), "other": _key(api_settings, OTHER),
           "store": store.id, "files": files, "conversation": conversation.id, "responses": [first.id, second.id],
           "http": http}
    http.close()


def sign_in(tab, key: str, *, heading: str = "Knowledge") -> None:
    page = tab.page
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)


def go(tab, hash_: str, heading: str | re.Pattern) -> None:
    tab.page.evaluate(f"location.hash = {hash_!r}")
    expect(tab.page.get_by_role("heading", level=1)).to_have_text(heading)


def shot(tab, screenshots: Path, name: str, *, full: bool = True, part: str | None = None) -> None:
    """A screenshot of the page (from its top when ``full``), or of the element ``part`` selects."""
    tab.page.locator("body[data-loading='false']").wait_for(state="attached")
    if part is not None:
        tab.page.locator(part).screenshot(path=str(screenshots / name))
        return
    if full:
        tab.page.evaluate("window.scrollTo(0, 0)")
    tab.page.screenshot(path=str(screenshots / name), full_page=full)


def test_sign_in_by_keyboard_and_see_the_stores_and_a_failed_files_error(open_tab, stack, screenshots):
    tab = open_tab()
    page = tab.page
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    assert page.evaluate("document.activeElement.type") == "password"  # the key field has the focus
    page.keyboard.type(stack["operator"])
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Knowledge")
    assert page.evaluate("document.activeElement.id") == "page-title"  # focus moves to the new page's heading
    assert page.evaluate("sessionStorage.length") == 1 and page.evaluate("localStorage.length") == 0
    expect(page.locator("#who")).to_contain_text(f"Tenant {TENANT} · operator key")

    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="demo"))
    expect(row).to_contain_text("5 done / 0 in progress / 1 failed")
    chunks = stack["http"].get(f"/vector_stores/{stack['store']}", params={"include": "details"}).json()
    expect(row).to_contain_text(f"{chunks['details']['chunk_count']}")
    expect(row).to_contain_text("pgvector")
    shot(tab, screenshots, "knowledge.png", full=False)

    page.get_by_role("link", name="demo").focus()
    page.keyboard.press("Enter")  # links work from the keyboard
    expect(page.get_by_role("heading", level=1)).to_have_text("Vector store demo")
    failed = stack["http"].get(f"/vector_stores/{stack['store']}/files/{stack['files']['scan.pdf']}").json()
    assert failed["status"] == "failed"
    scan = page.get_by_role("row").filter(has=page.get_by_role("link", name="scan.pdf"))
    expect(scan).to_contain_text("failed")
    expect(scan).to_contain_text(f"{failed['last_error']['code']}: {failed['last_error']['message']}")
    bm25 = page.get_by_role("row").filter(has=page.get_by_role("link", name="bm25.txt"))
    expect(bm25).to_contain_text("completed")
    shot(tab, screenshots, "store.png", full=False)
    page.get_by_label("Show files").select_option("failed")
    expect(page.get_by_role("link", name="bm25.txt")).to_have_count(0)
    expect(page.get_by_role("link", name="scan.pdf")).to_be_visible()

    page.get_by_label("Show files").select_option("")
    page.get_by_role("link", name="hnsw-and-filters.md").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("File hnsw-and-filters.md")
    listed = stack["http"].get(f"/vector_stores/{stack['store']}/files/{stack['files']['hnsw-and-filters.md']}/chunks",
                               params={"limit": 20}).json()["data"]
    expect(page.locator("ol.chunks > li")).to_have_count(len(listed))
    expect(page.locator("ol.chunks > li").first).to_contain_text(listed[0]["text"].split("\n")[0][:40])


def test_a_search_shows_each_legs_score_and_the_query_words(open_tab, stack, screenshots):
    tab = open_tab()
    sign_in(tab, stack["operator"])
    go(tab, f"#/knowledge/{stack['store']}", "Vector store demo")
    page = tab.page
    page.get_by_label("Query", exact=True).fill(SEARCH)
    page.get_by_label("Top k").fill("3")
    page.get_by_role("button", name="Search", exact=True).click()
    hits = page.locator("ol.hits > li")
    expect(hits).to_have_count(3)
    api = stack["http"].post(f"/vector_stores/{stack['store']}/search", json={
        "query": SEARCH, "max_num_results": 3, "include": ["score_details", "chunk"],
        "ranking_options": {"ranker": "auto", "score_threshold": 0,
                            "hybrid_search": {"embedding_weight": 1, "text_weight": 1}}}).json()["data"]
    for card, hit in zip(hits.all(), api):
        expect(card).to_contain_text(hit["filename"])
        expect(card).to_contain_text(f"Score (relevance){hit['score']:.3f}")
        expect(card).to_contain_text(f"Vector part (cosine){hit['score_details']['vector']:.3f}")
        keyword = hit["score_details"]["keyword"]
        expect(card).to_contain_text("Keyword part (BM25)" + (f"{keyword:.3f}" if keyword is not None else "—"))
    top = hits.first
    assert api[0]["filename"] == "bm25.txt" and api[0]["score_details"]["keyword"] > 0
    marks = [m.lower() for m in top.locator("mark").all_inner_texts()]
    assert {"rare", "word"} <= set(marks) <= {"rare", "word", "words", "weight", "weighted", "weights"}, marks
    text = api[0]["content"][0]["text"]
    assert len(marks) == len(api[0]["score_details"]["matches"]) == sum(
        1 for s, e in api[0]["score_details"]["matches"] if text[s:e].lower() in marks)
    shot(tab, screenshots, "search.png", part="#search-results")

    # one leg alone: the other part shows no score
    page.get_by_label("Keyword weight").fill("0")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(hits.first).to_contain_text("Keyword part (BM25)—")


def test_a_users_memories_edit_and_history_and_a_search(open_tab, stack, screenshots):
    tab = open_tab()
    sign_in(tab, stack["operator"])
    page = tab.page
    page.get_by_role("link", name="Memory", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Memory")
    ada = page.get_by_role("row").filter(has=page.get_by_role("link", name="ada", exact=True))
    expect(ada).to_contain_text(str(len(demo_memory.MEMORIES)))
    ada.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("User ada")
    cards = page.locator("ol.timeline > li")
    expect(cards).to_have_count(len(demo_memory.MEMORIES))
    for memory in demo_memory.MEMORIES:
        expect(page.locator("ol.timeline")).to_contain_text(memory)
    hiking = cards.filter(has_text="I go hiking most weekends.")
    memory_id = hiking.get_attribute("data-memory")
    before = stack["http"].get(f"/memories/{memory_id}").json()
    expect(hiking).to_contain_text(f"importance {before['importance']:.3f}")
    expect(hiking).to_contain_text(f"source {before['source']['kind']}")

    hiking.get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name="Edit memory")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Text").fill(EDITED)
    dialog.get_by_label("Importance (0 to 1)").fill("0.9")
    dialog.get_by_role("button", name="Save").click()
    expect(page.locator("#notices")).to_contain_text(f"Memory {memory_id} updated")
    edited = page.locator(f"ol.timeline > li[data-memory='{memory_id}']")
    expect(edited).to_contain_text(EDITED)
    expect(cards).to_have_count(len(demo_memory.MEMORIES))  # the old text is an earlier version of the same memory
    expect(edited.locator(".versions")).to_contain_text("I go hiking most weekends.")
    expect(edited.locator(".versions")).to_contain_text("superseded")
    edited.get_by_role("button", name="History").click()
    history = edited.locator(".history")
    expect(history.locator("del")).to_have_text("I go hiking most weekends.")
    expect(history.locator("ins")).to_have_text(EDITED)
    events = stack["http"].get(f"/memories/{memory_id}/history").json()["data"]
    assert [e["event"] for e in events] == ["ADD", "UPDATE"] and events[1]["new_memory"] == EDITED
    expect(history.locator("li")).to_have_count(len(events))
    assert stack["http"].get(f"/memories/{memory_id}").json()["importance"] == 0.9
    assert edited.get_by_role("button", name="History").get_attribute("aria-expanded") == "true"
    page.set_viewport_size({"width": 1280, "height": 1100})
    shot(tab, screenshots, "memory.png", full=False)

    page.get_by_label("Query", exact=True).fill("where does ada live?")
    page.get_by_role("button", name="Search memories").click()
    hits = page.locator("ol.hits > li")
    found = stack["http"].post("/memories/search", json={"user_id": "ada", "query": "where does ada live?",
                                                         "top_k": 5, "ranking": "balanced"}).json()["data"]
    expect(hits).to_have_count(len(found))
    expect(hits.first).to_contain_text(found[0]["memory"])
    expect(hits.first).to_contain_text(f"Score{found[0]['score']:.3f}")
    expect(hits.first).to_contain_text(f"Vector (cosine){found[0]['score_details']['vector']:.3f}")
    expect(hits.first).to_contain_text(f"Recency{found[0]['score_details']['recency']:.3f}")
    shot(tab, screenshots, "memory-search.png", part="#memory-results")


def test_a_purge_shows_its_scope_and_runs_once_it_is_typed(open_tab, stack, screenshots):
    tab = open_tab()
    sign_in(tab, stack["operator"])
    go(tab, "#/memory/user/grace", "User grace")
    page = tab.page
    page.get_by_role("button", name="Purge this scope…").click()
    dialog = page.get_by_role("dialog", name="Purge user_id=grace")
    expect(dialog).to_contain_text("exactly the scope user_id=grace")
    expect(dialog).to_contain_text("2 memories (2 active")
    confirm = dialog.get_by_label("Type user_id=grace to confirm")
    purge = dialog.get_by_role("button", name="Purge", exact=True)
    expect(confirm).to_be_focused()
    expect(purge).to_be_disabled()
    confirm.fill("user_id=ada")
    expect(purge).to_be_disabled()
    confirm.press("Enter")  # refused while it does not match
    expect(dialog).to_be_visible()
    confirm.fill("user_id=grace")
    expect(purge).to_be_enabled()
    shot(tab, screenshots, "purge.png", full=False)
    purge.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Memory")
    expect(page.locator("#notices")).to_contain_text("Purged user_id=grace: 2 memories")
    expect(page.get_by_role("link", name="grace", exact=True)).to_have_count(0)
    expect(page.get_by_role("link", name="ada", exact=True)).to_be_visible()
    http = stack["http"]
    assert http.get("/memories", params={"user_id": "grace", "include_inactive": "true"}).json()["data"] == []
    assert len(http.get("/memories", params={"user_id": "ada"}).json()["data"]) == len(demo_memory.MEMORIES)


def test_a_response_shows_what_recall_put_in_front_of_the_model(open_tab, stack, screenshots):
    tab = open_tab()
    sign_in(tab, stack["operator"])
    page = tab.page
    page.get_by_role("link", name="Responses", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Responses and conversations")
    page.get_by_role("link", name=stack["conversation"]).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Conversation {stack['conversation']}")
    turns = page.locator("section.turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(0)).to_contain_text("What could I cook for dinner tonight?")
    expect(turns.nth(0)).to_contain_text("A vegetable curry")
    expect(turns.nth(1)).to_contain_text("How are rare words weighted?")
    expect(turns.nth(1)).to_contain_text("recall: 2 memories")
    expect(turns.nth(1)).to_contain_text("cited: bm25.txt")
    opened = stack["http"].get(f"/responses/{stack['responses'][0]}").json()["usage"]["memory"]
    turns.nth(0).locator("summary").click()  # what recall gave the model, under the turn
    recalled = turns.nth(0).locator("details li")
    expect(recalled).to_have_count(len(opened["ids"]))
    expect(recalled.first).to_contain_text(f"Recall score{opened['scores'][0]:.3f}")
    shot(tab, screenshots, "conversation.png", full=False)

    response_id = stack["responses"][1]
    turns.nth(1).get_by_role("link", name=f"Response {response_id}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Response {response_id}")
    stored = stack["http"].get(f"/responses/{response_id}").json()
    recall = stored["usage"]["memory"]
    assert len(recall["ids"]) == 2 and len(recall["scores"]) == 2
    cards = page.get_by_role("list", name="Recalled memories and exchanges, in the order the model saw them")
    expect(cards.locator("> li")).to_have_count(2)
    for card, memory_id, value in zip(cards.locator("> li").all(), recall["ids"], recall["scores"]):
        memory = stack["http"].get(f"/memories/{memory_id}").json()
        expect(card).to_contain_text(memory_id)
        expect(card).to_contain_text(memory["memory"])
        expect(card).to_contain_text(f"Recall score{value:.3f}")
        expect(card.get_by_role("link", name="user ada")).to_be_visible()
    results = page.get_by_role("region", name="Results the model was given")
    expect(results).to_contain_text("bm25.txt")
    expect(results.get_by_role("row").filter(has_text="bm25.txt").first).to_contain_text("yes")
    expect(page.locator("main")).to_contain_text(f"bm25.txt {stack['files']['bm25.txt']} at character")
    page.evaluate("document.querySelectorAll('main h2')[2].scrollIntoView()")
    shot(tab, screenshots, "response.png", full=False)


def test_operations_change_limits_and_run_consolidation_for_an_operator_only(open_tab, stack, screenshots):
    tab = open_tab()
    sign_in(tab, stack["operator"])
    page = tab.page
    page.get_by_role("link", name="Operations").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Operations")
    entries = page.get_by_label("New value of max_entries")
    expect(entries).to_have_value("10000")
    used = page.get_by_role("row").filter(has=page.locator("code", has_text="max_entries"))
    active = stack["http"].get("/memories/stats").json()["active"]
    expect(used).to_contain_text(str(active))
    entries.fill("20000")
    page.get_by_role("button", name="Save limits").click()
    expect(page.locator("#notices")).to_contain_text("Limits saved: max_entries = 20,000")
    assert stack["http"].get("/tenant/limits").json()["limits"]["max_entries"] == 20000

    page.get_by_role("button", name="Run consolidation now for this tenant").click()
    expect(page.locator("#notices")).to_contain_text(f"consolidation ({TENANT}): finished")
    runs = page.get_by_role("region", name="Latest runs of consolidation")
    expect(runs).to_contain_text(TENANT)
    expect(runs).to_contain_text("finished")
    assert stack["http"].get("/jobs/consolidation/runs").json()["data"][0]["scope"] == TENANT
    expect(page.get_by_role("region", name=re.compile("could not apply"))).to_contain_text("invalid_sidecar")
    page.evaluate("window.scrollTo(0, 0)")
    shot(tab, screenshots, "operations.png", full=False)
    page.get_by_role("row").filter(has=page.locator("code", has_text="consolidation")).first.evaluate("el => el.scrollIntoView()")
    shot(tab, screenshots, "jobs.png", full=False)

    limited = open_tab()
    sign_in(limited, stack["full"])
    limited.page.get_by_role("link", name="Operations").click()
    expect(limited.page.get_by_role("heading", level=1)).to_have_text("Operations")
    expect(limited.page.locator("main")).to_contain_text("Changing limits needs an operator key")
    expect(limited.page.locator("main")).to_contain_text("The jobs and their runs need an operator key")
    expect(limited.page.get_by_role("button", name=re.compile("Run .* now"))).to_have_count(0)
    expect(limited.page.locator("input[type=number]")).to_have_count(0)
    refused = httpx.post(stack["http"].base_url.join("/v1/tenant/limits"), json={"max_entries": 1},
                         headers={"Authorization": f"Bearer {stack['full']}"})
    assert refused.status_code == 403


def test_a_second_tenants_key_sees_none_of_the_first(open_tab, stack):
    tab = open_tab()
    sign_in(tab, stack["other"])
    page = tab.page
    expect(page.locator("main")).to_contain_text("No vector stores.")
    go(tab, f"#/knowledge/{stack['store']}", re.compile("Vector store"))
    expect(page.get_by_role("alert").first).to_contain_text(f"No vector store found with id '{stack['store']}'")
    go(tab, "#/memory", "Memory")
    expect(page.locator("main")).to_contain_text("No memories yet.")
    go(tab, "#/memory/user/ada", "User ada")
    expect(page.locator("main")).to_contain_text("No memories in this scope.")
    go(tab, "#/responses", "Responses and conversations")
    expect(page.locator("main")).to_contain_text("No conversations.")
    expect(page.locator("main")).to_contain_text("No stored responses.")
    go(tab, f"#/responses/{stack['responses'][0]}", f"Response {stack['responses'][0]}")
    expect(page.get_by_role("alert")).to_contain_text("not found")
    assert stack["store"] not in page.content() or "No vector store found" in page.content()


_CONTRAST = """() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(Number); return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 }; };
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  const lum = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const under = (el) => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; } }
    let base = { r: 255, g: 255, b: 255 };
    for (const c of layers.reverse()) base = { r: c.r * c.a + base.r * (1 - c.a), g: c.g * c.a + base.g * (1 - c.a), b: c.b * c.a + base.b * (1 - c.a) };
    return base; };
  const low = [];
  for (const el of document.querySelectorAll('body *')) {
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const s = getComputedStyle(el);
    if (s.visibility === 'hidden' || el.getClientRects().length === 0 || el.disabled) continue;
    const fg = parse(s.color), bg = under(el);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(s.fontSize), bold = parseInt(s.fontWeight, 10) >= 700;
    if (ratio < ((size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5)) low.push(`${el.tagName} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
  }
  return low; }"""
_WIDER = """() => [...document.querySelectorAll('body *')].filter((el) => el.getBoundingClientRect().right
  > window.innerWidth + 1 && !el.closest('.table-wrap, .sections ul')).map((el) => `${el.tagName}.${el.className}`
  + ` ${Math.round(el.getBoundingClientRect().right)}`).slice(0, 10)"""
_UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')].filter((el) =>
  !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')
  && !(el.tagName === 'BUTTON' && el.textContent.trim())).map((el) => el.outerHTML.slice(0, 80))"""


@pytest.mark.parametrize("width, height", [(390, 844)])
def test_a_phone_width_labels_and_contrast(open_tab, stack, screenshots, width, height):
    tab = open_tab(width, height)
    page = tab.page
    assert page.evaluate(_CONTRAST) == [] and page.evaluate(_UNLABELLED) == []  # the sign-in page
    sign_in(tab, stack["operator"])
    for hash_, heading in ((f"#/knowledge/{stack['store']}", "Vector store demo"), ("#/memory/user/ada", "User ada"),
                           (f"#/responses/{stack['responses'][1]}", f"Response {stack['responses'][1]}"),
                           ("#/operations", "Operations"), ("#/knowledge", "Knowledge")):
        go(tab, hash_, heading)
        page.locator("body[data-loading='false']").wait_for(state="attached")
        page.wait_for_timeout(300)  # the last part of a page fills in after its heading
        assert page.evaluate(_WIDER) == [], hash_  # nothing makes the page scroll sideways
        assert page.evaluate(_CONTRAST) == [], hash_
        assert page.evaluate(_UNLABELLED) == [], hash_
        if hash_ == "#/memory/user/ada":
            shot(tab, screenshots, "phone-memory.png", full=False)
    before = page.evaluate("location.hash")
    page.get_by_role("link", name="Skip to content").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main" and page.evaluate("location.hash") == before
    nav = page.get_by_role("navigation", name="Sections")
    assert nav.bounding_box()["width"] <= width
    nav.get_by_role("link", name="Memory").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Memory")
    expect(nav.get_by_role("link", name="Memory")).to_have_attribute("aria-current", "page")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    assert page.evaluate("sessionStorage.length") == 0
