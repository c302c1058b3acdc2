# Two commands (see README): `make run` and `make test`. Both set up .venv/ when missing.
PY := .venv/bin/python
STAMP := .venv/.installed

BROWSER := .browser/chromium/chromium

.PHONY: run test lint bench browser

$(STAMP): pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	# torch/torchvision first and pinned: these builds lie on the machine's disk, and
	# onnx2torch must not pull any other torch.
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e '.[cpu,ray,dev]' torch==2.14.1 torchvision==0.29.1
	touch $(STAMP)

# The main job: a short differential campaign, ONNX Runtime vs TVM vs PyTorch, on the CPU.
# Its exit 1 means "found bugs": the expected outcome of the main job, not a failure of it.
# It ends with its elapsed time (set-up included: MAKE_START is read when make starts)
# and the commands that look at what it found.
MAKE_START := $(shell date +%s)
run: $(STAMP)
	rm -rf runs/demo
	@.venv/bin/onnxfuzz fuzz --backend ort --backend tvm --backend torch --tests 150 \
		--seed 0 --nodes 3:12 --out runs/demo; rc=$$?; \
	s=$$(( $$(date +%s) - $(MAKE_START) )); \
	echo "make run: done in $$((s / 60))m$$((s % 60))s (exit $$rc: 0 nothing found, 1 bugs found)"; \
	echo "next:  .venv/bin/onnxfuzz triage runs/demo              # bugs table, issue.md per bundle"; \
	echo "       .venv/bin/onnxfuzz report runs/demo              # one HTML page: runs/demo/report.html"; \
	echo "       .venv/bin/onnxfuzz replay runs/demo/bugs/<id>    # does a bug still reproduce?"; \
	[ $$rc -le 1 ] || exit $$rc

# A headless Chromium for the test that loads `onnxfuzz report`'s page in a real browser:
# one on PATH, else (as root, e.g. CI on Debian) the distribution's `chromium` package via
# apt-get, else npm's @sparticuz/chromium unpacked into .browser/. The script is quick when
# one is there. A failed install does not stop the suite: that one test skips, saying how.
$(BROWSER):
	tools/install_browser.sh || echo "warning: no headless browser installed; the report's browser test will skip" >&2

browser: $(BROWSER)

# pytest exits 5 when it collects nothing: that is a failure here, never a pass.
# Two pytest workers (TEST_WORKERS=0: one process, no workers), each taking whole files
# (--dist loadfile: a file's module fixtures, e.g. test_ray.py's local Ray cluster, are
# built once, on one worker): most tests are one process busy with generation or a backend,
# so two workers use the two cores CI has.
TEST_WORKERS ?= 2
test: $(STAMP) $(BROWSER)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile; rc=$$?; [ $$rc -ne 5 ] || { echo "no tests collected" >&2; exit 1; }; exit $$rc

lint: $(STAMP)
	.venv/bin/ruff check .

bench: $(STAMP)
	$(PY) tools/bench_generate.py
	$(PY) tools/bench_report.py
