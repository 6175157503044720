"""WebShop data loading (upstream schema and rules), goals and splits."""

import gzip
import json
import random

import pytest

from dreamgym.envs.webshop.catalog import CatalogError, load_catalog, parse_pricing
from dreamgym.envs.webshop.goals import build_goals, price_upper, split_goals


def _prod(asin, name="Acme Red Tea", pricing="$12.50", options=None, **kw):
    d = {
        "asin": asin,
        "name": name,
        "full_description": "Nice tea.",
        "small_description": ["ORGANIC: yes"],
        "pricing": pricing,
        "images": ["x.jpg"],
        "customization_options": options,
        "category": "grocery",
        "query": " Herbal Tea ",
        "product_category": "Grocery › Tea",
    }
    d.update(kw)
    return d


def _write(tmp_path, products, ins=None, human=None, gz=False):
    files = {"items_shuffle_1000.json": products, "items_ins_v2_1000.json": ins or {}}
    if human is not None:
        files["items_human_ins.json"] = human
    for name, obj in files.items():
        if gz:
            with gzip.open(tmp_path / f"{name}.gz", "wt", encoding="utf-8") as f:
                json.dump(obj, f)
        else:
            (tmp_path / name).write_text(json.dumps(obj), encoding="utf-8")
    return tmp_path


def test_upstream_load_rules(tmp_path):
    opts = {"Color": [{"value": " Black/White ", "image": None}, {"value": "Red", "image": None}]}
    products = [
        _prod("B000000001", options=opts, pricing="$24.49 - $39.99"),
        _prod("nan"),
        _prod("B0000000011"),  # longer than 10 chars: skipped
        _prod("B000000001", name="duplicate"),  # later duplicate: skipped
        _prod("B000000002", pricing="", small_description="one bullet"),
    ]
    ins = {"B000000001": {"attributes": ["organic"]}}
    cat = load_catalog(_write(tmp_path, products, ins))
    assert list(cat.products) == ["B000000001", "B000000002"]
    p1, p2 = cat.products["B000000001"], cat.products["B000000002"]
    assert p1.title == "Acme Red Tea" and p1.query == "herbal tea"
    assert p1.options == {"color": ["black | white", "red"]}
    assert p1.price_tag == "$24.49 to $39.99" and 24.49 <= p1.price <= 39.99
    assert p2.prices == [100.0] and p2.price_tag == "$100.0" and p2.price == 100.0
    assert p2.bullets == ["one bullet"] and p2.attributes == ["DUMMY_ATTR"]
    assert load_catalog(tmp_path) is cat  # cached per directory


def test_parse_pricing():
    assert parse_pricing("$5") == ([5.0], "$5.0")
    assert parse_pricing("$1,024.50 - $2,000.00 - $3") == ([1024.5, 2000.0], "$1024.5 to $2000.0")
    assert parse_pricing(None) == ([100.0], "$100.0")


def test_gzip_files(tmp_path):
    cat = load_catalog(_write(tmp_path, [_prod("B000000003")], gz=True))
    assert list(cat.products) == ["B000000003"]


@pytest.mark.parametrize(
    "bad, field",
    [
        (_prod("B000000004", pricing=12.5), "pricing"),
        (_prod("B000000004", pricing="$abc"), "pricing"),
        (_prod("B000000004", customization_options={"size": "large"}), "customization_options.size"),
        (_prod("B000000004", small_description=[1, 2]), "small_description"),
        ({"name": "no asin"}, "asin"),
    ],
)
def test_broken_product_names_file_record_field(tmp_path, bad, field):
    _write(tmp_path, [_prod("B000000001"), bad])
    with pytest.raises(CatalogError) as e:
        load_catalog(tmp_path)
    msg = str(e.value)
    assert "items_shuffle_1000.json" in msg and "record 1" in msg and f"'{field}'" in msg


def test_broken_human_file(tmp_path):
    _write(tmp_path, [_prod("B000000001")], human={"B000000001": [{"instruction": 3}]})
    with pytest.raises(
        CatalogError, match=r"items_human_ins.json: record 0 \(asin 'B000000001'\).*'instruction'"
    ):
        load_catalog(tmp_path)


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(CatalogError, match="no WebShop data file"):
        load_catalog(tmp_path)
    _write(tmp_path, [_prod("B000000001")])
    (tmp_path / "items_ins_v2_1000.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(CatalogError, match="items_ins_v2_1000.json: not valid JSON"):
        load_catalog(tmp_path)


def test_price_upper_rule():
    seen = {price_upper(24.49, random.Random(i))[0] for i in range(200)}
    assert seen == {40.0, 50.0, 60.0}  # candidates 30,40,50,60; the larger of two is never 30
    assert price_upper(985.0, random.Random(0)) == (1000000.0, "")
    assert price_upper(24.49, random.Random(0))[1].startswith(", and price lower than ")


def test_human_and_synthetic_goals(tmp_path):
    opts = {
        "size": [{"value": "S", "image": None}, {"value": "M", "image": None}],
        "color": [{"value": "Red", "image": None}],
    }
    products = [_prod("B000000001", options=opts), _prod("B000000002")]
    ins = {
        "B000000001": {
            "attributes": ["organic", "vegan"],
            "instruction": "Find me organic tea",
            "instruction_attributes": ["organic"],
        },
        "B000000002": {"attributes": ["vegan"]},
    }
    human = {
        "B000000001": [
            {
                "instruction": "i want red tea.",
                "instruction_attributes": ["organic"],
                "instruction_options": ["red"],
            },
            {"instruction": "skipped", "instruction_attributes": [], "instruction_options": []},
        ]
    }
    cat = load_catalog(_write(tmp_path, products, ins, human))
    hg = build_goals(cat, human=True)
    assert len(hg) == 1 and hg[0].goal_options == ["red"] and hg[0].query == "herbal tea"
    assert hg[0].instruction_text.startswith("i want red tea, and price lower than ")
    sg = build_goals(cat, human=False)
    assert len(sg) == 2  # color (1 value) x size (2 values), sorted option names
    texts = sorted(g.instruction_text.split(", and price")[0] for g in sg)
    assert texts == [
        "Find me organic tea with color: red, and size: m",
        "Find me organic tea with color: red, and size: s",
    ]
    assert all(g.weight == pytest.approx(0.5) for g in sg)
    # derived once per catalog (Catalog.memo): a second call returns the very same goals
    assert build_goals(cat, human=False) is sg and split_goals(cat) is split_goals(cat)
    built = []
    assert (
        cat.memo("k", lambda: built.append(1) or "v") == cat.memo("k", lambda: built.append(2) or "w") == "v"
    )
    assert built == [1]


def test_bundled_catalog_size_and_splits():
    cat = load_catalog()
    assert len(cat) >= 1000 and len({p.category for p in cat.products.values()}) >= 8
    assert sum(len(v) for v in cat.human_ins.values()) >= 3000
    splits = split_goals(cat, human=True)
    assert len(splits["test"]) >= 500
    train_products = {g.asin for g in splits["train"]}
    assert not train_products & {g.asin for g in splits["test"]}
    assert not train_products & {g.asin for g in splits["val"]}
    ids = [g.goal_id for s in splits.values() for g in s]
    assert len(ids) == len(set(ids))
    assert max(len(p.title) for p in cat.products.values()) <= 90


def test_bundled_catalog_is_reproducible_from_the_script():
    from script_loader import load_script

    from dreamgym.envs.webshop.catalog import default_data_dir

    mod = load_script("make_webshop_catalog")
    files = mod.build(seed=0, n_products=1200)
    for name, obj in files.items():
        bundled = json.loads((default_data_dir() / name).read_text(encoding="utf-8"))
        assert bundled == json.loads(json.dumps(obj)), (
            f"{name} differs from scripts/make_webshop_catalog.py output"
        )
