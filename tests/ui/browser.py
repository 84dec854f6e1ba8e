"""Drives the web UI in Debian's headless Chromium over the DevTools protocol (Playwright).

Run by tests/api/ui.rs, which starts a real synthgate with the mock LLM and mock-mcp, creates
the jobs this script reads, and writes their ids to a context file:

    python browser.py CONTEXT.json

The script runs the cases of the context's `mode` ("main" or "auth"), each a named check, and
prints one line `RESULT {"passed": [...], "failed": {name: why}}` that the Rust test asserts on;
it exits 1 when a check failed. Screenshots of the main views go to the context's
`screenshots` folder. The browser is never downloaded: `executable_path` is the system one.
"""

import json
import re
import sys
import traceback

from playwright.sync_api import expect, sync_playwright

XSS = "<img src=x onerror=alert(1)>"
TIMEOUT_MS = 20_000


class Run:
    def __init__(self, ctx, browser):
        self.ctx = ctx
        self.browser = browser
        self.passed = []
        self.failed = {}
        self.dialogs = []
        self.console_errors = []

    def page(self, **kw):
        kw.setdefault("viewport", {"width": 1280, "height": 860})
        context = self.browser.new_context(**kw)
        context.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        page = context.new_page()
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))
        return page

    def url(self, route=""):
        return self.ctx["base"] + "/ui" + route

    def shot(self, page, name, full_page=False):
        page.screenshot(path=f"{self.ctx['screenshots']}/{name}.png", full_page=full_page)

    def check(self, name, fn):
        try:
            fn()
            self.passed.append(name)
        except Exception as e:  # every failure is reported, then the next case runs
            traceback.print_exc()
            self.failed[name] = f"{type(e).__name__}: {e}"[:2000]


def main_cases(run):
    ctx = run.ctx
    page = run.page()

    def live_progress():
        # Opened while the job runs; no reload: the event stream moves the bar and the badge.
        resp = page.request.post(ctx["base"] + "/v1/jobs", data=ctx["slow_job_body"])
        assert resp.status == 202, resp.text()
        page.goto(run.url(f"#/jobs/{resp.json()['id']}"))
        badge = page.locator(".title-row .badge")
        expect(badge).to_have_text(re.compile("queued|running"))
        # Its records wait on the slow model, and the page says so rather than "running".
        expect(page.locator(".progress-big")).to_contain_text("waiting for a model")
        bar = page.locator('.progress-big [role="progressbar"]')
        expect(bar).to_have_attribute("aria-valuenow", str(ctx["slow_records"]), timeout=60_000)
        expect(badge).to_have_text("completed")
        # The records table was refreshed by the stream's record events.
        expect(page.locator("table.records .badge", has_text="completed")).to_have_count(ctx["slow_records"])
        assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1

    def jobs_list():
        page.goto(run.url())
        row = page.locator(f'tr[data-job="{ctx["tool_job"]}"]')
        expect(row).to_be_visible()
        expect(row.locator(".badge")).to_have_text("completed")
        bar = row.locator('[role="progressbar"]')
        expect(bar).to_have_attribute("aria-valuenow", str(ctx["tool_records"]))
        expect(row).to_contain_text(f"{ctx['tool_records']}/{ctx['tool_records']} done")
        expect(row).to_contain_text("req")  # LLM usage
        # A job with failed records says so, and the failures show on the bar.
        xss_row = page.locator(f'tr[data-job="{ctx["xss_job"]}"]')
        expect(xss_row.locator(".badge")).to_have_text("completed with failures")
        run.shot(page, "jobs")
        # The status filter (the server's) hides the jobs of other statuses, and shows them
        # again; so does the name filter.
        page.select_option("#status-filter", "failed")
        expect(row).to_have_count(0)
        page.select_option("#status-filter", "completed")
        expect(row).to_be_visible()
        page.select_option("#status-filter", "")
        page.fill("#name-filter", ctx["xss_name"])
        page.press("#name-filter", "Enter")
        expect(xss_row).to_be_visible()
        expect(row).to_have_count(0)
        expect(xss_row.locator(".job-name")).to_have_text(ctx["xss_name"])
        page.fill("#name-filter", "")
        page.press("#name-filter", "Enter")
        expect(row).to_be_visible()

    def job_view():
        page.goto(run.url(f"#/jobs/{ctx['xss_job']}"))
        expect(page.locator("h1")).to_contain_text(ctx["xss_name"])
        expect(page.locator(".badge").first).to_have_text("completed with failures")
        # Every column, the LLM column first, and the shown ones choosable.
        heads = page.locator("table.records thead th[data-column]")
        expect(heads).to_have_text(["says", "label"])
        page.locator("details.columns > summary").click()
        page.locator('details.columns input[data-column="label"]').uncheck()
        expect(heads).to_have_text(["says"])
        page.locator('details.columns input[data-column="label"]').check()
        expect(heads).to_have_text(["says", "label"])
        # First errors, the records table with error codes, and its status filter.
        expect(page.get_by_text("First errors")).to_be_visible()
        expect(page.locator("ul.errors")).to_contain_text("llm_bad_request")
        expect(page.locator("table.records tbody tr")).to_have_count(ctx["xss_records"])
        expect(page.locator("table.records")).to_contain_text("llm_bad_request")
        expect(page.locator("table.records")).to_contain_text(XSS)
        page.select_option("#record-status", "failed")
        expect(page.locator("table.records tbody tr")).to_have_count(ctx["xss_failed"])
        page.select_option("#record-status", "")
        expect(page.locator("table.records tbody tr")).to_have_count(ctx["xss_records"])
        # The config, pretty and collapsible: closed first, opened by the keyboard.
        summary = page.locator("details.config > summary")
        summary.focus()
        page.keyboard.press("Enter")
        expect(page.locator("details.config")).to_have_attribute("open", "")
        expect(page.locator("details.config")).to_contain_text('"llm-text"')
        # Downloads go through fetch with the key.
        with page.expect_download() as dl:
            page.get_by_role("button", name="JSONL").click()
        path = dl.value.path()
        lines = open(path, encoding="utf-8").read().splitlines()
        assert len(lines) == ctx["xss_records"] - ctx["xss_failed"], lines
        assert json.loads(lines[0])["label"] == XSS, lines[0]
        for fmt in ("CSV", "Parquet"):
            expect(page.get_by_role("button", name=fmt)).to_be_visible()
        run.shot(page, "job", full_page=True)

    def record_with_tools():
        page.goto(run.url(f"#/records/{ctx['tool_record']}"))
        conv = page.locator('.conversation[data-column="answer"]')
        expect(conv).to_be_visible()
        for role in ("user", "assistant", "tool"):
            expect(conv.locator(f".msg-{role}").first).to_be_visible()
        call = conv.locator(".tool-call").filter(has_text="echo")
        expect(call.locator(".tool-name")).to_have_text("echo")
        # Arguments pretty-printed (indented JSON), the result beside the call's name.
        assert '\n  "text": "sunny, 21 °C"' in call.locator("pre.args").inner_text()
        echo_result = conv.locator(".msg-tool").filter(has_text="sunny, 21 °C")
        expect(echo_result).to_contain_text("echo")
        # The image tool's result is shown as an image that really loaded.
        tool_img = conv.locator(".msg-tool img.media")
        expect(tool_img).to_have_count(1)
        assert tool_img.evaluate("i => i.complete && i.naturalWidth > 0"), "tool image not decoded"
        # Reasoning is there, collapsed.
        reasoning = conv.locator("details.reasoning")
        expect(reasoning).to_have_count(1)
        assert reasoning.get_attribute("open") is None, "reasoning should start collapsed"
        expect(conv.locator(".msg-assistant").last).to_contain_text("It is sunny")
        # The image column's picture, fetched with the key and shown from a blob: URL.
        picture = page.locator("table.values img.media")
        expect(picture).to_have_count(1)
        page.wait_for_function(
            "() => { const i = document.querySelector('table.values img.media');"
            " return i && i.src.startsWith('blob:') && i.complete && i.naturalWidth > 0; }"
        )
        run.shot(page, "record", full_page=True)
        page.emulate_media(color_scheme="dark")
        run.shot(page, "record-dark")
        page.emulate_media(color_scheme="light")

    def job_tool_use():
        # 3 records, one turn each calling `echo` and `image`: the job's tool use by column.
        page.goto(run.url(f"#/jobs/{ctx['tool_job']}"))
        expect(page.locator(".badge").first).to_have_text("completed")
        expect(page.get_by_text("Tool use")).to_be_visible()
        table = page.locator("section").filter(has_text="Tool use").locator("table")
        expect(table.locator("tbody tr")).to_have_count(2)
        for tool in ("echo", "image"):
            row = table.locator("tbody tr").filter(has_text=tool)
            expect(row).to_contain_text("answer")
            expect(row.locator("td.num")).to_have_text(str(ctx["tool_records"]))
            expect(row).to_contain_text(f"{ctx['tool_records']} ok")

    def xss_shows_text_and_runs_nothing():
        page.goto(run.url(f"#/records/{ctx['xss_record']}"))
        values = page.locator("table.values")
        expect(values).to_contain_text(XSS)
        conv = page.locator('.conversation[data-column="says"]')
        expect(conv.locator(".msg-user")).to_contain_text(XSS)
        expect(conv.locator(".msg-assistant")).to_contain_text(XSS)
        assert page.locator('img[src="x"]').count() == 0, "the value became an element"
        assert page.evaluate("() => document.querySelectorAll('img:not(.media)').length") == 0
        # The job page shows the metadata's script as text, too.
        page.goto(run.url(f"#/jobs/{ctx['xss_job']}"))
        expect(page.locator("table.records")).to_contain_text(XSS)
        expect(page.locator("dl.facts")).to_contain_text("</script>")
        assert page.locator("main script").count() == 0
        page.wait_for_timeout(300)  # an onerror handler would have fired by now
        assert run.dialogs == [], f"a dialog opened: {run.dialogs}"

    def failed_record_marks_the_failure():
        page.goto(run.url(f"#/records/{ctx['failed_record']}"))
        expect(page.locator(".error-box").first).to_contain_text("llm_bad_request")
        expect(page.locator(".error-box").first).to_contain_text("says")
        # The column it failed in has no value: its row says where it stopped.
        row = page.locator("table.values tr.failed-row")
        expect(row.locator("th")).to_have_text("says")
        expect(row).to_contain_text("llm_bad_request")
        # Its first request was refused: the request is shown (the rendered prompt, the
        # model), then the provider's answer where it stopped.
        conv = page.locator('.conversation[data-column="says"]')
        expect(conv.locator(".msg-user")).to_contain_text("XSS fail me")
        expect(conv.locator(".model-info")).to_contain_text("writer")
        expect(conv.locator(".failure")).to_contain_text("this record is meant to fail")
        run.shot(page, "record-failed", full_page=True)

    def preview_lists_problems():
        page.goto(run.url("#/preview"))
        # A good YAML config first: its records show in the record views.
        page.fill("#config-text", ctx["preview_ok_yaml"])
        page.fill("#num-records", "2")
        page.get_by_role("button", name="Run preview").click()
        expect(page.locator(".preview-record")).to_have_count(2)
        expect(page.locator(".preview-record table.values").first).to_contain_text("topic")
        # A bad one: each problem under the column it names.
        page.fill("#config-text", json.dumps(ctx["preview_bad_config"], indent=2))
        page.get_by_role("button", name="Run preview").click()
        problems = page.locator(".problems")
        expect(problems).to_be_visible()
        for column, code in ctx["preview_expect"]:
            item = problems.locator(f'li[data-column="{column}"]')
            expect(item).to_have_class(re.compile("col-bad"))
            expect(item).to_contain_text(code)
        for column in ctx["preview_fine"]:
            expect(problems.locator(f'li[data-column="{column}"]')).to_have_class(re.compile("col-ok"))
        run.shot(page, "preview-problems", full_page=True)

    def narrow_and_keyboard():
        narrow = run.page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
        narrow.goto(run.url(f"#/records/{ctx['tool_record']}"))
        expect(narrow.locator('.conversation[data-column="answer"]')).to_be_visible()
        width = narrow.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways on a narrow screen ({width}px)"
        run.shot(narrow, "record-narrow")
        # The jobs table fits a phone: nothing scrolls sideways, the progress shows.
        narrow.goto(run.url())
        expect(narrow.locator(f'tr[data-job="{ctx["tool_job"]}"] [role="progressbar"]')).to_be_visible()
        width = narrow.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, f"the jobs page scrolls sideways on a narrow screen ({width}px)"
        wrap = narrow.evaluate("() => { const w = document.querySelector('.table-wrap'); return [w.scrollWidth, w.clientWidth]; }")
        assert wrap[0] <= wrap[1], f"the jobs table is cut on a narrow screen ({wrap})"
        run.shot(narrow, "jobs-narrow")
        narrow.context.close()
        # Keyboard: Tab reaches the navigation, and focus is visible.
        page.goto(run.url())
        expect(page.locator(f'tr[data-job="{ctx["tool_job"]}"]')).to_be_visible()
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement.textContent")
        assert focused == "synthgate", focused
        outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
        assert outline not in ("none", ""), outline

    run.check("a_running_job_follows_its_event_stream", live_progress)
    run.check("jobs_list_shows_a_finished_job", jobs_list)
    run.check("job_view_shows_errors_records_config_downloads", job_view)
    run.check("record_shows_tool_call_result_and_images", record_with_tools)
    run.check("job_view_shows_tool_use_by_column", job_tool_use)
    run.check("xss_value_is_text_and_nothing_runs", xss_shows_text_and_runs_nothing)
    run.check("failed_record_is_marked", failed_record_marks_the_failure)
    run.check("preview_lists_problems_next_to_columns", preview_lists_problems)
    run.check("narrow_screen_and_keyboard", narrow_and_keyboard)
    # The bad preview's 422 is logged by the browser's own network log; nothing else may be.
    run.check("no_console_errors_or_dialogs", lambda: no_errors(run, allow=("status of 422",)))


def auth_cases(run):
    ctx = run.ctx
    page = run.page()

    def asks_and_works():
        page.goto(run.url())
        expect(page.locator("#api-key")).to_be_visible()
        assert page.locator("tr[data-job]").count() == 0
        page.fill("#api-key", "not-the-key-0123456789")
        page.get_by_role("button", name="Continue").click()
        expect(page.locator(".key-form .error-box")).to_contain_text("unauthorized")
        page.fill("#api-key", ctx["api_key"])
        page.get_by_role("button", name="Continue").click()
        expect(page.locator(f'tr[data-job="{ctx["auth_job"]}"]')).to_be_visible()
        # Kept for the tab only, and never as a cookie.
        stored = page.evaluate("() => sessionStorage.getItem('synthgate.api_key')")
        assert stored == ctx["api_key"], stored
        assert page.evaluate("() => localStorage.length") == 0
        assert page.context.cookies() == []
        page.reload()
        expect(page.locator(f'tr[data-job="{ctx["auth_job"]}"]')).to_be_visible()
        page.goto(run.url(f"#/jobs/{ctx['auth_job']}"))
        expect(page.locator(".badge").first).to_have_text("completed")
        # Another tab starts without the key.
        other = page.context.new_page()
        other.goto(run.url())
        expect(other.locator("#api-key")).to_be_visible()
        other.close()
        page.get_by_role("button", name="Forget key").click()
        expect(page.locator("#api-key")).to_be_visible()
        assert page.evaluate("() => sessionStorage.length") == 0

    run.check("with_keys_the_page_asks_for_one_and_works_with_it", asks_and_works)
    # The wrong key's 401 is an expected console error of the browser's own network log.
    run.check("no_dialogs", lambda: no_errors(run, allow=("status of 401",)))


def no_errors(run, allow=()):
    errors = [e for e in run.console_errors if not any(a in e for a in allow)]
    assert errors == [], f"console errors: {errors}"
    assert run.dialogs == [], f"dialogs: {run.dialogs}"


def main():
    ctx = json.load(open(sys.argv[1], encoding="utf-8"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ctx["chromium"], headless=True)
        run = Run(ctx, browser)
        {"main": main_cases, "auth": auth_cases}[ctx["mode"]](run)
        browser.close()
    print("RESULT " + json.dumps({"passed": run.passed, "failed": run.failed}), flush=True)
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
