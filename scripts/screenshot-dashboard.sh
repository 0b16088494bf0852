#!/usr/bin/env bash
# Takes the dashboard screenshot of docs/reference/serve.md: runs `greenlight demo --keep` (a scripted agent goes
# red, reads the evidence, goes green), serves its state file, and has Debian's Chromium (driven
# by playwright-core, as the browser test does) capture the goal page.
#
# Usage: scripts/screenshot-dashboard.sh [OUT.png]   (default docs/img/dashboard-goal.png)
# Needs: chromium (apt-get install chromium) and playwright-core in .tools/npm
#        (scripts/ci/install-playwright.sh), or GREENLIGHT_CHROMIUM / GREENLIGHT_NODE_MODULES.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/docs/img/dashboard-goal.png}"
chromium="${GREENLIGHT_CHROMIUM:-/usr/bin/chromium}"
modules="${GREENLIGHT_NODE_MODULES:-$root/.tools/npm/node_modules}"
[[ -x "$chromium" ]] || { echo "screenshot-dashboard: no Chromium at $chromium: apt-get install chromium" >&2; exit 1; }
[[ -f "$modules/playwright-core/package.json" ]] ||
    { echo "screenshot-dashboard: no playwright-core in $modules: run scripts/ci/install-playwright.sh" >&2; exit 1; }

cargo build --quiet -p greenlight
bin="${CARGO_TARGET_DIR:-$root/target}/debug/greenlight"
work="$(mktemp -d)"
server=
cleanup() {
    [[ -n "$server" ]] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

kept="$(cd "$work" && "$bin" demo --keep | sed -n 's/^kept: \(.*\) (state database: \(.*\))$/\2/p')"
[[ -f "$kept" ]] || { echo "screenshot-dashboard: the demo kept no state database" >&2; exit 1; }
demo_dir="$(dirname "$kept")"
"$bin" serve --listen 127.0.0.1:0 --state "$kept" 2>"$work/serve.log" &
server=$!
url=
for _ in $(seq 1 100); do
    url="$(sed -n 's|.*serving on \(http://[^ ]*\).*|\1|p' "$work/serve.log")"
    [[ -n "$url" ]] && break
    sleep 0.1
done
[[ -n "$url" ]] || { cat "$work/serve.log" >&2; exit 1; }

NODE_PATH="$modules" node - "$chromium" "${url%/}/goals/1" "$out" <<'JS'
const { chromium } = require('playwright-core');
const [executablePath, url, out] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  await page.goto(url);
  await page.waitForFunction(() => window.greenlight && window.greenlight.state === 'live');
  // Follow off and back at the top, so the sticky header sits where a reader sees it.
  await page.evaluate(() => {
    const follow = document.getElementById('follow');
    if (follow && follow.checked) follow.click();
    window.scrollTo(0, 0);
  });
  await page.waitForTimeout(300);
  await page.screenshot({ path: out, fullPage: true });
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
JS
rm -rf "$demo_dir"
echo "screenshot-dashboard: wrote $out"
