// One chat in a real Open WebUI, driven in headless Debian Chromium by playwright-core, ending in a
// screenshot. Run by bench/openwebui_screenshot.py, which passes everything in the environment:
//   OWUI_URL      Open WebUI's base URL (http://127.0.0.1:PORT)
//   OWUI_MODEL    the model to pick (agent-gateway)
//   OWUI_PROMPT   the message to send
//   OWUI_OUT      where to write the PNG
//   OWUI_PROFILE  an empty folder for Chromium's --user-data-dir
//   OWUI_TIMEOUT  seconds to wait for the answer (default 120)
//   OWUI_DIAG     a path prefix for page.html (the DOM) and page.txt (what it saw and clicked), for
//                 when the picture does not show what was expected
//   OWUI_DONE     a regular expression the finished answer matches (default: "every day")
//   OWUI_FILE     a file to attach to the message (optional)
//   OWUI_PARAMS   more query parameters for the chat page, e.g. "web-search=true" (optional)
//   CHROMIUM      the browser (default /usr/bin/chromium; never a downloaded one)
// Exit code 0 once the PNG is written, 1 otherwise.
import { chromium } from 'playwright-core';
import { writeFileSync } from 'node:fs';

const url = process.env.OWUI_URL;
const model = process.env.OWUI_MODEL || 'agent-gateway';
const prompt = process.env.OWUI_PROMPT || 'What do otters eat?';
const out = process.env.OWUI_OUT;
const diag = process.env.OWUI_DIAG || out.replace(/\.png$/, '');
const timeoutMs = 1000 * Number(process.env.OWUI_TIMEOUT || 120);
const notes = [];
const note = (line) => { notes.push(line); console.log(line); };

// Without the background-networking flags Chromium keeps dialling Google on a closed network.
const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function clickIfVisible(locator, what) {
  try {
    if (await locator.first().isVisible()) {
      await locator.first().click({ timeout: 5000 });
      note(`clicked ${what}`);
      return true;
    }
  } catch (err) {
    note(`could not click ${what}: ${err.message.split('\n')[0]}`);
  }
  return false;
}

async function dismissModals(page) {
  // The "what's new" changelog and similar first-visit dialogs.
  for (const name of [/okay, let's go/i]) {
    await clickIfVisible(page.getByRole('button', { name }), `dialog button ${name}`);
  }
  await page.keyboard.press('Escape').catch(() => {});
}

const context = await chromium.launchPersistentContext(process.env.OWUI_PROFILE, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true, args, viewport: { width: 1280, height: 1500 }, deviceScaleFactor: 1,
  colorScheme: 'light',
});
// The network is closed and the run is offline: anything not on 127.0.0.1 is refused at once,
// except the favicons Open WebUI asks Google for, answered with a plain grey dot (in place of a
// broken-image icon next to each site).
const favicon = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAYAAABzenr0AAAAaklEQVR42u3XwQ0AIAgDQEd3EH8O4Ig6gFGEoDSmJLx7'
  + 'Ly0pcZRTasu7fRHchfWFKIL9IcbgCRIZbkM4h+sQl8LPEaGAy+EyIhTwKHyNIIAAAsIBfAn5G8IUEohKBlFKIWo5xGECc5p9OwP/1uTv70jx'
  + 'CwAAAABJRU5ErkJggg==', 'base64');
await context.route('**/*', (route) => {
  const target = new URL(route.request().url());
  if (target.hostname === '127.0.0.1' || target.protocol === 'data:' || target.protocol === 'blob:') {
    return route.continue();
  }
  if (target.hostname === 'www.google.com' && target.pathname.startsWith('/s2/favicons')) {
    return route.fulfill({ status: 200, contentType: 'image/png', body: favicon });
  }
  return route.abort('blockedbyclient');
});
let code = 1;
try {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(30000);
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith('/api/chat/completions')) {
      try { note(`page asked for features ${JSON.stringify(JSON.parse(request.postData() || '{}').features)}`); }
      catch { /* not JSON */ }
    }
  });
  page.on('console', (msg) => { if (msg.type() === 'error') notes.push(`console error: ${msg.text()}`); });
  const params = process.env.OWUI_PARAMS ? `&${process.env.OWUI_PARAMS}` : '';
  await page.goto(`${url}/?models=${encodeURIComponent(model)}${params}`,
    { waitUntil: 'domcontentloaded', timeout: 120000 });
  const input = page.locator('#chat-input');
  await input.waitFor({ state: 'visible', timeout: 120000 });
  await page.waitForTimeout(1500);
  await dismissModals(page);
  const selected = await page.locator('body').innerText();
  note(`model ${model} on the page before sending: ${selected.includes(model)}`);

  if (process.env.OWUI_FILE) {
    await page.locator('input[type="file"]').first().setInputFiles(process.env.OWUI_FILE);
    note(`attached ${process.env.OWUI_FILE}`);
    await page.waitForTimeout(4000); // the upload and its processing
  }
  await input.click();
  await page.keyboard.type(prompt);
  await page.keyboard.press('Enter');
  note(`sent: ${prompt}`);

  // Finished: the end of bench/fake_reasoner.py's answer is on the page and no stop button
  // (shown while a reply streams) is left.
  const finished = new RegExp(process.env.OWUI_DONE || 'every day');
  const deadline = Date.now() + timeoutMs;
  let done = false;
  while (Date.now() < deadline) {
    const text = await page.locator('body').innerText();
    const streaming = await page.locator('button[aria-label="Stop"], button.stop-button, #stop-response-button').count();
    if (finished.test(text) && streaming === 0) { done = true; break; }
    await page.waitForTimeout(500);
  }
  note(done ? 'answer finished' : `answer not finished after ${timeoutMs / 1000} s`);
  await page.waitForTimeout(1500); // let the last frame render (the Sources row comes with it)
  await dismissModals(page);

  // Open the collapsed parts (selectors from Open WebUI's Collapsible, StatusHistory,
  // WebSearchResults and Citations components): the reasoning block, the search's URL list, the
  // Sources list.
  const answer = page.locator('.chat-assistant').last();
  // 0.12 gathers a message's reasoning blocks (and tool calls) into one "Explored" group first
  for (const group of await answer.locator('[aria-label="Toggle details"][aria-expanded="false"]').all()) {
    await clickIfVisible(group, 'a details group');
  }
  await page.waitForTimeout(500);
  for (const button of await answer.locator('button[aria-expanded="false"]', { hasText: /Thought/ }).all()) {
    await clickIfVisible(button, '"Thought for ..."');
  }
  await clickIfVisible(answer.locator('.status-description .cursor-pointer').last(), 'the status line');
  await clickIfVisible(answer.locator('button[aria-label^="Toggle "][aria-label*="source"]'), 'the Sources button');
  await page.waitForTimeout(1000); // the slide transitions take 300 ms

  await answer.scrollIntoViewIfNeeded().catch(() => {});
  const body = await page.locator('body').innerText();
  const seen = await answer.innerText().catch(() => body);
  for (const [label, re] of [['status line', /Searched \d+ sites?|Searching/i],
                             ['Sources', /\b\d+ Sources?\b/], ['Thought for N seconds', /Thought for/i]]) {
    note(`${label} in the answer: ${re.test(seen)}`);
  }
  // The page from the top to just below the answer (a tall viewport, so that nothing scrolls).
  const box = await answer.boundingBox();
  const viewport = page.viewportSize();
  const bottom = box ? Math.min(viewport.height, Math.ceil(box.y + box.height + 40)) : viewport.height;
  const height = Math.max(bottom, 480);
  await page.screenshot({ path: out, clip: { x: 0, y: 0, width: viewport.width, height } });
  note(`screenshot: ${out}`);
  writeFileSync(`${diag}.html`, await page.content());
  writeFileSync(`${diag}.txt`, notes.join('\n') + '\n\n--- page text ---\n' + body);
  code = done ? 0 : 1;
} catch (err) {
  note(`failed: ${err.stack || err}`);
} finally {
  await context.close().catch(() => {});
}
process.exit(code);
