"""The grounded synthetic env: answers read from the record equal the real env's, written results name
only recorded products, purchases of unrecorded products pay nothing, and no real env is touched."""

from __future__ import annotations

import pytest

from dreamgym.collect import collect_trajectories
from dreamgym.envs.base import as_text_list
from dreamgym.envs.grounding import PathFreeGrounding
from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask
from dreamgym.envs.webshop import WebShopEnv
from dreamgym.envs.webshop.grounding import WebShopGrounding, page_of, select_option, strip_selection
from dreamgym.modeling.formats import ParsedOutcome
from dreamgym.retrieval.buffer import ReplayBuffer
from dreamgym.schema import iter_transitions


@pytest.fixture(scope="module")
def episodes():
    """Real WebShop train episodes of four scripted agents over a 100-product catalog (so that their tasks
    and products overlap): the record and the probes."""
    mix = {"non_oracle": 30, "near_miss": 30}
    kw = {"num_products": 100}
    return collect_trajectories("webshop", "train", 30, 30, seed=3, teacher=False, mix=mix, env_kwargs=kw)


def _buffer(trajs) -> ReplayBuffer:
    buf = ReplayBuffer()
    buf.add(iter_transitions(trajs))
    return buf


def test_answers_read_from_other_episodes_equal_the_real_env(episodes):
    """The grounding indexes the random, visible-text and near-miss agents' episodes; on the expert's
    episodes of the same tasks, every step it answers (read, composed, or a done page paid by the
    model) shows the next state the real env showed, with its reward and end."""
    record = [t for t in episodes if t.policy != "expert"]
    probes = [t for t in episodes if t.policy == "expert"]
    g = WebShopGrounding().sync(_buffer(record))
    kinds: dict[str, int] = {}
    for traj in probes:
        states, actions = [traj.transitions[0].state], []
        for t in traj.transitions:
            ans = g.answer(traj.task_id, states, actions, t.action)
            if ans is not None:
                kinds[ans.kind] = kinds.get(ans.kind, 0) + 1
                if ans.kind == "void":  # a purchase on a page the record lacks (in RL: one the model wrote)
                    assert t.action == "click[buy now]" and not g.recorded_item(t.state)
                    states.append(t.next_state)
                    actions.append(t.action)
                    continue
                shown = g.with_score(ans.next_state, t.score) if ans.kind == "reward" else ans.next_state
                assert shown == t.next_state, (t.action, shown, t.next_state)
                assert ans.done == t.done
                if ans.kind != "reward":
                    assert (ans.reward, ans.score) == (t.reward, t.score)
            states.append(t.next_state)
            actions.append(t.action)
    assert kinds.get("read", 0) >= 10 and kinds.get("composed", 0) >= 20 and kinds.get("reward", 0) >= 3, (
        kinds
    )


def test_a_recorded_purchase_is_paid_what_the_real_env_paid(episodes):
    g = WebShopGrounding().sync(_buffer(episodes))
    buys = [
        (traj, i) for traj in episodes for i, t in enumerate(traj.transitions) if t.action == "click[buy now]"
    ]
    assert len(buys) >= 50
    for traj, i in buys:
        ts = traj.transitions
        ans = g.answer(traj.task_id, [ts[0].state] + [t.next_state for t in ts[:i]], [t.action for t in ts[:i]],
                       "click[buy now]")  # fmt: skip
        assert ans.kind == "read" and ans.next_state == ts[i].next_state and ans.score == ts[i].score


def test_synthetic_steps_are_never_indexed(episodes):
    buf = _buffer(episodes[:5])
    g = WebShopGrounding().sync(buf)
    n = len(g.results)
    fake = next(iter_transitions(episodes[5:6]))
    fake.source, fake.next_state = "synthetic", "[page] results | query: invented | page 1 | total results: 1"
    buf.add([fake])
    assert len(g.sync(buf).results) == n and ("invented", 1) not in g.results


def test_option_click_and_selection_round_trip():
    item = "[page] item | b1\n[title] t\n[option size] s ; m (selected)\n[option color] red ; blue\n[button] buy now"
    assert strip_selection(item) == item.replace(" (selected)", "")
    assert select_option(item, "s").split("\n")[2] == "[option size] s (selected) ; m"
    assert select_option(item, "blue").split("\n")[3] == "[option color] red ; blue (selected)"
    assert select_option(item, "green") is None
    assert page_of(item) == ("item", "b1")
    assert page_of("[page] results | query: a | b | page 2 | total results: 30") == ("results", "a | b", 2)


def test_written_results_name_only_recorded_products(episodes):
    g = WebShopGrounding().sync(_buffer(episodes))
    recorded = set(g.products) & set(g.items)
    asin = sorted(recorded)[0]
    written = "\n".join(
        [
            "[page] results | query: something else | page 4 | total results: 12",
            "[button] back to search",
            f"[product] {asin} | whatever the model wrote | $1.00",
            "[product] b0invented | red cotton t-shirt for men | $12.00",
            "[product] b0invented | red cotton t-shirt for men | $12.00",
        ]
    )
    page, changed = g.constrain(["[page] search\n[search box]"], "search[new query never seen]", written)
    lines = page.split("\n")
    assert lines[0] == "[page] results | query: new query never seen | page 1 | total results: 12"
    products = [ln for ln in lines if ln.startswith("[product] ")]
    assert products[0] == g.products[asin] and len(products) == 3 and changed == 2
    assert {ln.split(" | ")[0][len("[product] ") :] for ln in products} <= recorded
    assert len(set(products)) == 3  # a product is listed once
    # a state that is not a results page is left as written
    assert g.constrain([page], "click[" + asin + "]", "[page] item | x") == ("[page] item | x", 0)


class _Scripted:
    """An experience model that writes fixed outcomes and a results page of an invented product."""

    def __init__(self, buffer):
        self.buffer = buffer
        self.calls = []

    def to(self, device):  # the device seam SyntheticEnv.place_model calls; nothing to move
        return self

    def predict(self, queries):
        self.calls += [q.action for q in queries]
        out = []
        for q in queries:
            if q.action == "click[buy now]":
                out.append(ParsedOutcome(True, "[page] done\n[score] 0.9", 0.0, True, 0.9))
            else:
                page = (
                    "[page] results | query: x | page 1 | total results: 1\n[product] b0zzz | red shirt | $3"
                )
                out.append(ParsedOutcome(True, page, 0.0, False, 0.0))
        return out


def test_grounded_env_plays_the_record_and_never_touches_the_real_env(episodes, monkeypatch):
    """A grounded synthetic env replays a real episode's steps from the record (no model call where the
    record answers), writes new queries' pages naming recorded products only, and pays a purchase of a
    recorded product the model's score; WebShopEnv's step raises throughout."""
    buf = _buffer(episodes)

    def boom(*a, **k):
        raise AssertionError("the real env was stepped")

    monkeypatch.setattr(WebShopEnv, "_act", boom)
    monkeypatch.setattr(WebShopEnv, "_step", boom)
    traj = next(t for t in episodes if t.policy == "expert" and t.transitions[-1].action == "click[buy now]")
    first = traj.transitions[0]
    task = SyntheticTask(traj.task_id, traj.instruction, first.state, list(first.available_actions))
    model = _Scripted(buf)
    env = SyntheticEnv(model, [task], "webshop", batch_size=[1], max_steps=30, ground=True)
    td = env.reset()
    for t in traj.transitions:
        td["action"] = [t.action]
        td = env.step(td)["next"]
        assert as_text_list(td["observation"])[0] == t.next_state
    assert bool(td["done"]) and float(td["score"]) == pytest.approx(traj.transitions[-1].score)
    assert model.calls == [] and env.health()["record_share"] == 1.0

    td = env.reset()
    td["action"] = ["search[a query no agent ever typed]"]
    td = env.step(td)["next"]
    obs = as_text_list(td["observation"])[0]
    assert model.calls == ["search[a query no agent ever typed]"]
    assert obs.startswith("[page] results | query: a query no agent ever typed | page 1")
    asin = obs.split("\n")[-1].split(" | ")[0][len("[product] ") :]
    assert asin != "b0zzz" and asin in WebShopGrounding().sync(buf).items
    td["action"] = [f"click[{asin}]"]
    td = env.step(td)["next"]  # the recorded page, no model call
    assert len(model.calls) == 1 and as_text_list(td["observation"])[0].startswith(f"[page] item | {asin}")
    td["action"] = ["click[buy now]"]
    td = env.step(td)["next"]
    assert bool(td["done"]) and float(td["score"]) == pytest.approx(0.9) and not bool(td["sim_error"])
    assert as_text_list(td["observation"])[0].splitlines()[-1] == "[score] 0.9000"
    assert env.health()["model_paid"] == 1.0


def test_a_purchase_on_a_page_the_model_wrote_pays_nothing(episodes):
    buf = _buffer(episodes)
    page = "[page] item | b0zzz\n[title] an invented product\n[price] $3.00\n[button] buy now"
    task = SyntheticTask("t-void", "buy it", page, ["click[buy now]"])
    env = SyntheticEnv(_Scripted(buf), [task], "webshop", batch_size=[1], ground=True)
    td = env.reset()
    td["action"] = ["click[buy now]"]
    td = env.step(td)["next"]
    assert bool(td["done"]) and bool(td["sim_error"]) and float(td["reward"]) == 0.0
    assert float(td["score"]) == 0.0 and env.health()["void_endings"] == 1.0


def _grounded_env(episodes, buf, unrecorded: str) -> tuple[_Scripted, SyntheticEnv]:
    """A one-slot grounded env on the first episode's task over ``buf``, its model scripted (calls recorded)."""
    traj = episodes[0]
    first = traj.transitions[0]
    task = SyntheticTask(traj.task_id, traj.instruction, first.state, list(first.available_actions))
    model = _Scripted(buf)
    return model, SyntheticEnv(model, [task], "webshop", batch_size=[1], ground=True, unrecorded=unrecorded)


def test_nearest_mode_answers_from_recorded_steps_without_the_model(episodes):
    buf = _buffer(episodes)
    model, env = _grounded_env(episodes, buf, "nearest")
    td = env.reset()
    td["action"] = ["search[zzz unseen words qqq]"]
    td = env.step(td)["next"]
    assert model.calls == [] and as_text_list(td["observation"])[0].startswith(
        "[page] results | query: zzz unseen words qqq | page 1"
    )
    g = WebShopGrounding().sync(buf)
    for line in as_text_list(td["observation"])[0].split("\n"):
        if line.startswith("[product] "):
            assert line in g.products.values()


def test_unknown_modes_and_a_grounded_env_without_a_buffer_are_refused():
    with pytest.raises(ValueError, match="unrecorded"):
        SyntheticEnv(unrecorded="guess")
    with pytest.raises(ValueError, match="buffer"):
        SyntheticEnv(ground=True)


def test_every_env_has_a_grounding():
    from dreamgym.envs.alfworld.env import ALFWorldEnv

    assert isinstance(WebShopEnv.grounding(), WebShopGrounding)
    assert isinstance(ALFWorldEnv.grounding(), PathFreeGrounding)


def test_invented_lines_become_products_real_searches_for_similar_words_listed(episodes):
    g = WebShopGrounding().sync(_buffer(episodes))
    query = next(q for (q, n) in g.results if n == 1 and len(g.similar_products(q)) >= 3)
    pool = g.similar_products(query + " deluxe")
    assert pool and set(pool) <= set(g.items)
    written = "\n".join(["[page] results"] + ["[product] b0invented | a product no one recorded | $5"] * 3)
    page, changed = g.constrain(["[page] search\n[search box]"], f"search[{query} deluxe]", written)
    shown = [
        ln.split(" | ")[0][len("[product] ") :] for ln in page.split("\n") if ln.startswith("[product] ")
    ]
    assert changed == 3 and len(shown) == 3 and set(shown) <= set(pool)


def test_a_grounded_dreamgym_fit_steps_the_real_env_only_in_its_audit(
    tiny_lm, webshop_offline, tmp_path, monkeypatch
):
    """GRPO in a grounded synthetic env (a scripted experience model over the offline data's buffer):
    WebShopEnv's step raises unless the reward audit is replaying, and the audit does replay."""
    from rl_toy import audited_fit

    from dreamgym.envs.factory import EnvFactory
    from dreamgym.envs.synthetic import tasks_from_trajectories
    from dreamgym.rl.audit import RewardAudit
    from dreamgym.rl.schedules import SyntheticSchedule

    inside = {"audit": False}
    real_act, real_audit = WebShopEnv._act, RewardAudit.__call__

    def guarded(self, slot, action):
        assert inside["audit"], "the real env was stepped outside the audit"
        return real_act(self, slot, action)

    def audited(self, env, episodes):
        inside["audit"] = True
        try:
            return real_audit(self, env, episodes)
        finally:
            inside["audit"] = False

    monkeypatch.setattr(WebShopEnv, "_act", guarded)
    monkeypatch.setattr(RewardAudit, "__call__", audited)
    buf = ReplayBuffer.from_files([webshop_offline])
    tasks = tasks_from_trajectories([webshop_offline])
    built = []

    class Grounded(EnvFactory):
        is_real = False

        def build(self):
            built.append(
                SyntheticEnv(_Scripted(buf), tasks, "webshop", [4], max_steps=4, write_back=True, ground=True)
            )
            return built[-1]

    schedule = SyntheticSchedule(Grounded("synthetic", batch_size=4, max_steps=4), iterations=2)
    _, m = audited_fit(tiny_lm, schedule, tmp_path)
    assert float(m["data/audit_transitions"]) > 0 and float(m["data/real_transitions"]) == 0
    assert built and built[0].valid_steps > 0 and "sim/record_share" in m


def test_an_ending_the_model_writes_where_webshop_never_ends_is_void(episodes):
    """The model ends a search with a paid done page: WebShop ends only at a purchase, so the step is void."""

    class EndsAnywhere(_Scripted):
        def predict(self, queries):
            return [ParsedOutcome(True, "[page] done\n[score] 1.0", 1.0, True, 1.0) for _ in queries]

    traj = episodes[0]
    first = traj.transitions[0]
    task = SyntheticTask(traj.task_id, traj.instruction, first.state, list(first.available_actions))
    env = SyntheticEnv(EndsAnywhere(_buffer(episodes)), [task], "webshop", batch_size=[1], ground=True)
    td = env.reset()
    td["action"] = ["search[words no agent typed zzz]"]
    td = env.step(td)["next"]
    assert bool(td["done"]) and bool(td["sim_error"]) and float(td["reward"]) == 0.0
    assert env.health()["void_endings"] == 1.0


def test_search_mode_composes_new_queries_results_from_recorded_products_without_the_model(episodes):
    """``unrecorded="search"``: a query the record never saw gets a results page in WebShop's format,
    ranked by the record's own search, every line a recorded product; ``next >`` pages on; no model call."""
    buf = _buffer(episodes)
    g = WebShopGrounding().sync(buf)
    asin, line = next((a, ln) for a, ln in g.products.items() if a in g.items)
    title = line.split(" | ")[1]
    query = f"{title.lower()} zzqq"
    assert (query, 1) not in g.results and g.search(query)[0] == asin
    model, env = _grounded_env(episodes, buf, "search")
    td = env.reset()
    td["action"] = [f"search[{query}]"]
    td = env.step(td)["next"]
    page = as_text_list(td["observation"])[0]
    hits = g.search(query)
    assert page.split("\n")[:3] == [
        f"[page] results | query: {query} | page 1 | total results: {len(hits)}",
        "[button] back to search",
        "[button] next >",
    ]
    lines = [ln for ln in page.split("\n") if ln.startswith("[product] ")]
    assert lines == [g.products[a] for a in hits[:10]] and lines[0] == line
    assert f"click[{asin}]" in as_text_list(td["available_actions"])[0]
    td["action"] = ["click[next >]"]
    td = env.step(td)["next"]
    page2 = as_text_list(td["observation"])[0]
    assert (
        page2.split("\n")[0].endswith(f"page 2 | total results: {len(hits)}") and "[button] < prev" in page2
    )
    assert [ln for ln in page2.split("\n") if ln.startswith("[product] ")] == [
        g.products[a] for a in hits[10:20]
    ]
    assert model.calls == [] and env.health()["record_share"] == 1.0


def test_the_records_search_lists_most_of_what_the_real_search_lists(episodes):
    """The record's stand-in for the search engine, on the expert's queries (unrecorded: the record is the
    other agents' episodes): most products of each real page 1 are on the composed page 1."""
    record = [t for t in episodes if t.policy != "expert"]
    g = WebShopGrounding().sync(_buffer(record))
    shared = total = 0
    for traj in episodes:
        if traj.policy != "expert":
            continue
        for t in traj.transitions:
            if t.action.startswith("search[") and (page_of(t.next_state)[1], 1) not in g.results:
                real = [ln for ln in t.next_state.split("\n") if ln.startswith("[product] ")]
                ans = g.compose([t.state], t.action)
                mine = [ln for ln in ans.next_state.split("\n") if ln.startswith("[product] ")]
                shared, total = shared + len(set(real) & set(mine)), total + len(real)
    assert total >= 50 and shared / total >= 0.6, (shared, total)


def test_record_files_join_the_buffer_in_the_grounding_but_not_in_retrieval(episodes, tmp_path):
    """``record``: episodes in trajectory files the grounding reads beside the buffer's (kept when the
    buffer is re-indexed); the buffer the model retrieves from is unchanged; without ``ground`` refused."""
    from dreamgym.schema import write_trajectories

    expert = [t for t in episodes if t.policy == "expert"]
    rest = [t for t in episodes if t.policy != "expert"]
    extra = tmp_path / "extra.jsonl"
    write_trajectories(extra, expert)
    buf = _buffer(rest)
    alone = WebShopGrounding().sync(buf)
    both = WebShopGrounding().sync(buf).add_files([extra])
    assert len(alone.purchases) < len(both.purchases)  # the expert's purchases are in the record now
    assert set(both.items) == set(WebShopGrounding().sync(_buffer(episodes)).items)
    both.sync(_buffer(rest))  # another buffer: the files are indexed again
    assert set(both.items) == set(WebShopGrounding().sync(_buffer(episodes)).items)
    traj = rest[0]
    first = traj.transitions[0]
    task = SyntheticTask(traj.task_id, traj.instruction, first.state, list(first.available_actions))
    model = _Scripted(buf)
    env = SyntheticEnv(model, [task], "webshop", batch_size=[1], ground=True, record=[str(extra)])
    assert len(model.buffer) == len(buf) == sum(len(t.transitions) for t in rest)
    assert len(env._grounding.purchases) == len(both.purchases)
    with pytest.raises(ValueError, match="set ground=True"):
        SyntheticEnv(model, [task], "webshop", batch_size=[1], record=[str(extra)])
    with pytest.raises(FileNotFoundError):
        SyntheticEnv(
            model, [task], "webshop", batch_size=[1], ground=True, record=[str(tmp_path / "none.jsonl")]
        )


def test_the_records_search_indexes_the_attribute_line_only_when_asked(episodes):
    """``search_attributes=False``: the record's search indexes only the fields the real engine indexes
    (the attribute line of an item page is not one of them); SyntheticEnv passes the option through."""
    g = WebShopGrounding().sync(_buffer(episodes))
    plain = WebShopGrounding(search_attributes=False).sync(_buffer(episodes))
    asin, attrs = next(
        (a, ln[len("[attributes] ") :].replace(" ; ", " ").lower())
        for a, page in g.items.items()
        for ln in page.split("\n")
        if ln.startswith("[attributes] ") and len(ln) > 20
    )
    assert attrs in g.record_document(asin) and attrs not in plain.record_document(asin)
    assert g.record_document(asin).replace(" " + attrs, "") == plain.record_document(asin)
    assert WebShopEnv.grounding(search_attributes=False).search_attributes is False
    with pytest.raises(ValueError, match=r"grounding options are \['search_attributes'\], got \['typo'\]"):
        WebShopEnv.grounding(typo=1)
    from dreamgym.envs.alfworld.env import ALFWorldEnv

    with pytest.raises(ValueError, match="takes no options"):  # the default grounding (ALFWorld's) takes none
        ALFWorldEnv.grounding(search_attributes=False)
    traj = episodes[0]
    first = traj.transitions[0]
    task = SyntheticTask(traj.task_id, traj.instruction, first.state, list(first.available_actions))
    with pytest.raises(ValueError, match="need ground=True"):
        SyntheticEnv(
            _Scripted(_buffer(episodes)), [task], "webshop", grounding_options={"search_attributes": False}
        )
