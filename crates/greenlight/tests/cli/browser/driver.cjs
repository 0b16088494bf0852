// Drives headless Chromium for the dashboard's browser test, one JSON command per stdin line:
//   {"id":1,"op":"open","url":"http://127.0.0.1:PORT/goals/1"}
//   {"id":2,"op":"eval","expr":"document.title"}
//   {"id":3,"op":"wait","expr":"document.querySelectorAll('[data-seq]').length >= 5","timeout_ms":5000}
//   {"id":4,"op":"screenshot","path":"target/test-artifacts/x.png"}
//   {"id":5,"op":"errors"}      uncaught page exceptions seen so far
//   {"id":6,"op":"close"}
// Each command gets one line back: {"id":N,"ok":true,"value":…,"ms":…} or {"id":N,"ok":false,
// "error":"…"}. The first line out is {"ready":true,"version":"…"} once the browser is up.
//
// Env: GREENLIGHT_CHROMIUM (default /usr/bin/chromium). playwright-core is found through
// NODE_PATH (the test points it at .tools/npm/node_modules).
'use strict';

const readline = require('node:readline');

let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch (e) {
  process.stderr.write(
    'browser driver: the npm package playwright-core is not installed (' + e.message.split('\n')[0] +
      '): run scripts/ci/install-browser-test.sh, or npm install --prefix .tools/npm playwright-core\n',
  );
  process.exit(3);
}

function reply(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  const executablePath = process.env.GREENLIGHT_CHROMIUM || '/usr/bin/chromium';
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e && e.stack ? e.stack : e)));

  reply({ ready: true, version: browser.version() });

  const ops = {
    open: async (c) => {
      const res = await page.goto(c.url, { waitUntil: 'domcontentloaded', timeout: c.timeout_ms || 10000 });
      return res ? res.status() : null;
    },
    eval: async (c) => page.evaluate(c.expr),
    // Polled from here, not with waitForFunction: its in-page polling compiles the expression
    // with `new Function`, which the dashboard's Content-Security-Policy (rightly) refuses.
    wait: async (c) => {
      const limit = Date.now() + (c.timeout_ms || 5000);
      for (;;) {
        const value = await page.evaluate(c.expr);
        if (value) return value;
        if (Date.now() > limit) {
          throw new Error('timed out after ' + (c.timeout_ms || 5000) + ' ms waiting for ' + c.expr);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    screenshot: async (c) => {
      await page.screenshot({ path: c.path, fullPage: !!c.full_page });
      return c.path;
    },
    errors: async () => errors.slice(),
    close: async () => {
      await browser.close();
      return null;
    },
  };

  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (e) {
      reply({ id: null, ok: false, error: 'not JSON: ' + line });
      continue;
    }
    const op = ops[cmd.op];
    const t0 = Date.now();
    if (!op) {
      reply({ id: cmd.id, ok: false, error: 'unknown op ' + cmd.op });
      continue;
    }
    try {
      const value = await op(cmd);
      reply({ id: cmd.id, ok: true, value: value === undefined ? null : value, ms: Date.now() - t0 });
    } catch (e) {
      reply({ id: cmd.id, ok: false, error: String(e && e.message ? e.message : e), ms: Date.now() - t0 });
    }
    if (cmd.op === 'close') break;
  }
  // stdin closed without a close: do not leave the browser behind.
  await browser.close().catch(() => {});
}

main().catch((e) => {
  process.stderr.write('browser driver: ' + (e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
