// greenlight dashboard: keeps the server-rendered pages live.
//
// One EventSource per tab (browsers allow about six HTTP/1.1 connections per origin across all
// tabs). Every frame becomes one row keyed by its seq (`data-seq`, `id="seq-N"`), so a frame
// delivered twice can never render twice. Everything that comes from the server reaches the page
// through textContent, never as HTML.
'use strict';

(function () {
  const body = document.body;
  const $ = (id) => document.getElementById(id);
  const FAILING = new Set(['fail', 'timeout', 'failed', 'error', 'block', 'interrupted']);
  // The goals page lists this many recent runs, as the server does (summary::RECENT_RUNS).
  const RECENT_RUNS = 100;

  // --- small DOM and format helpers ------------------------------------------------------------

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // The same class token the server makes: a stored word can never add a class.
  function token(word) {
    return String(word).toLowerCase().replace(/[^a-z0-9-]/g, '-');
  }

  function badge(word) {
    return el('span', 'badge b-' + token(word), word);
  }

  function muted(text) {
    return el('span', 'muted', text);
  }

  function code(text) {
    return el('code', null, text);
  }

  function duration(ms) {
    ms = Math.max(0, Math.floor(ms));
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    const pad = (n) => String(n).padStart(2, '0');
    if (ms < 3600000) return Math.floor(ms / 60000) + 'm ' + pad(Math.floor((ms % 60000) / 1000)) + 's';
    return Math.floor(ms / 3600000) + 'h ' + pad(Math.floor((ms % 3600000) / 60000)) + 'm';
  }

  function clock(ms) {
    return new Date(ms).toLocaleTimeString([], { hour12: false });
  }

  function timeNode(ms) {
    const t = el('time', null, new Date(ms).toLocaleString());
    t.dateTime = new Date(ms).toISOString();
    t.dataset.ms = ms;
    return t;
  }

  function elapsedNode(from, to) {
    const span = el('span', 'elapsed');
    span.dataset.from = from;
    if (to !== null && to !== undefined) span.dataset.to = to;
    span.textContent = duration((to ?? Date.now()) - from);
    return span;
  }

  function verdictNode(verdict) {
    return verdict ? badge(verdict) : muted('—');
  }

  // The goal's gates as they stand (`1/2 green`), drawn as pages.rs's gates_cell draws them.
  function gatesNode(g) {
    const text = g.gates_green + '/' + g.gates_total + ' green';
    if (g.gates_total > 0 && g.gates_green === g.gates_total) return el('span', 'badge b-pass', text);
    if (g.last_verdict) return el('span', 'badge b-fail', text);
    return muted(text);
  }

  function setChildren(node, ...children) {
    if (node) node.replaceChildren(...children);
  }

  function cell(...children) {
    const td = el('td');
    td.append(...children);
    return td;
  }

  // Server-rendered times are UTC; show them in local time. Elapsed times tick every second.
  document.querySelectorAll('time[data-ms]').forEach((t) => {
    t.textContent = new Date(Number(t.dataset.ms)).toLocaleString();
  });
  function tick() {
    const now = Date.now();
    document.querySelectorAll('.elapsed').forEach((e) => {
      const to = e.dataset.to ? Number(e.dataset.to) : now;
      e.textContent = duration(to - Number(e.dataset.from));
    });
  }
  setInterval(tick, 1000);

  // --- the one live connection ----------------------------------------------------------------

  const pill = $('pill');
  const PILL = {
    offline: 'not connected',
    connecting: 'connecting…',
    live: 'live',
    reconnecting: 'reconnecting…',
    resync: 'resync needed',
    closed: 'stream ended',
  };
  function setPill(state) {
    live.state = state;
    if (!pill) return;
    pill.dataset.state = state;
    pill.textContent = PILL[state] || state;
  }

  // Exposed for people debugging in the console and for the browser test.
  const live = { source: null, state: 'offline', lastId: '', ended: false, opens: 0 };
  window.greenlight = live;

  // Opens the tab's EventSource on `url`. The browser reconnects by itself with Last-Event-ID
  // after the server ends a body; when it gives up instead (a refused connection while the server
  // restarts), this reopens it with the last id as `?last_event_id=`, backing off to 30 s.
  function connect(url, on) {
    let backoff = 1000;
    function open() {
      if (live.ended) return;
      if (live.source) live.source.close();
      let target = url;
      if (live.lastId) {
        target += (url.includes('?') ? '&' : '?') + 'last_event_id=' + encodeURIComponent(live.lastId);
      }
      const es = new EventSource(target);
      live.source = es;
      setPill(live.opens ? 'reconnecting' : 'connecting');
      es.onopen = () => {
        live.opens += 1;
        backoff = 1000;
        setPill('live');
      };
      es.onmessage = (e) => {
        if (!e.data) return; // a priming or retry-only block: nothing to show
        if (e.lastEventId) live.lastId = e.lastEventId;
        on.frame && on.frame(e.data);
      };
      for (const [name, handler] of Object.entries(on.named || {})) {
        es.addEventListener(name, (e) => e.data && handler(e.data));
      }
      es.addEventListener('error', (e) => {
        if (es !== live.source) return;
        // `event: error` from the server is a MessageEvent with data: the terminal error frame.
        if (typeof e.data === 'string' && e.data) {
          on.terminal ? on.terminal(e.data) : end('closed');
          return;
        }
        if (live.ended) return;
        setPill('reconnecting');
        if (es.readyState === EventSource.CLOSED) {
          setTimeout(open, backoff);
          backoff = Math.min(backoff * 2, 30000);
        }
      });
    }
    open();
  }

  // Ends the tab's stream for good: nothing reconnects after this.
  function end(state) {
    live.ended = true;
    if (live.source) live.source.close();
    setPill(state);
  }

  // --- the goals page -------------------------------------------------------------------------

  function goalsPage() {
    // What the page shows, by id: `goals` (on connect) fills it, `changes` updates it.
    const goals = new Map();
    const runs = new Map();
    // Only the newest page takes goals it did not list; an older page keeps to its own rows.
    const newest = !new URLSearchParams(location.search).has('before');
    const byNewest = (a, b) => b.id - a.id;
    function parse(data) {
      try {
        return JSON.parse(data);
      } catch (_) {
        return null;
      }
    }
    function show() {
      renderGoals([...goals.values()].sort(byNewest));
      renderRuns([...runs.values()].sort(byNewest).slice(0, RECENT_RUNS));
    }
    connect(body.dataset.liveUrl, {
      named: {
        goals: (data) => {
          const list = parse(data);
          if (!list) return;
          goals.clear();
          runs.clear();
          for (const g of list.goals || []) goals.set(g.id, g);
          for (const r of list.runs || []) runs.set(r.id, r);
          show();
        },
        changes: (data) => {
          const changed = parse(data);
          if (!changed) return;
          for (const g of changed.goals || []) {
            if (newest || goals.has(g.id)) goals.set(g.id, g);
          }
          for (const r of changed.runs || []) runs.set(r.id, r);
          show();
        },
      },
    });
  }

  function link(href, text, title) {
    const a = el('a', null, text);
    a.href = href;
    if (title) a.title = title;
    return a;
  }

  function pathCell(path) {
    const td = el('td', 'path', path);
    td.title = path;
    return td;
  }

  function renderGoals(goals) {
    const tbody = document.querySelector('#goals tbody');
    if (!tbody) return;
    tbody.replaceChildren(
      ...goals.map((g) => {
        const tr = el('tr');
        tr.dataset.goal = g.id;
        const state = cell(badge(g.state));
        if (g.pause_reason) state.append(el('div', 'sub', g.pause_reason));
        const to = g.state === 'active' ? null : g.updated_at;
        const text = cell(link('/goals/' + g.id, g.text, g.text));
        text.className = 'text';
        tr.append(
          cell(link('/goals/' + g.id, '#' + g.id)),
          text,
          state,
          cell(g.turns_used + '/' + g.max_turns),
          cell(gatesNode(g)),
          cell(g.agent),
          cell(elapsedNode(g.created_at, to)),
          pathCell(g.worktree),
        );
        tr.children[0].className = 'num';
        tr.children[3].className = 'num';
        tr.children[6].className = 'num';
        return tr;
      }),
    );
    const empty = $('goals-empty');
    if (empty) empty.hidden = goals.length > 0;
  }

  function renderRuns(runs) {
    const tbody = document.querySelector('#runs tbody');
    if (!tbody) return;
    tbody.replaceChildren(
      ...runs.map((r) => {
        const tr = el('tr');
        tr.dataset.run = r.id;
        tr.append(
          cell(link('/runs/' + r.id, 'run-' + r.id)),
          cell(r.kind),
          cell(badge(r.result || 'running')),
          cell(r.exit_code ?? ''),
          cell(r.gates),
          cell(timeNode(r.started_at)),
          cell(elapsedNode(r.started_at, r.ended_at)),
          pathCell(r.worktree),
        );
        for (const i of [0, 3, 4, 6]) tr.children[i].className = 'num';
        return tr;
      }),
    );
    const empty = $('runs-empty');
    if (empty) empty.hidden = runs.length > 0;
  }

  // --- a goal's or a run's timeline -----------------------------------------------------------

  function streamPage() {
    const stream = body.dataset.stream;
    const timeline = $('timeline');
    const follow = $('follow');
    const errorsOnly = $('errors-only');
    const count = $('frame-count');
    const rows = new Map(); // seq -> row: the one place a frame can be shown
    const tools = new Map(); // tool call id -> the row of its start
    let target = permalink();

    function permalink() {
      const m = /^#seq-(\d+)$/.exec(location.hash);
      return m ? Number(m[1]) : 0;
    }

    // Follow: keep the newest row in view until the user scrolls up.
    let autoScroll = false;
    let lastY = window.scrollY;
    let followQueued = false;
    function scrollToEnd() {
      if (followQueued) return;
      followQueued = true;
      requestAnimationFrame(() => {
        followQueued = false;
        if (!follow.checked) return;
        autoScroll = true;
        window.scrollTo(0, document.documentElement.scrollHeight);
        lastY = window.scrollY;
        requestAnimationFrame(() => {
          autoScroll = false;
        });
      });
    }
    function atEnd() {
      return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;
    }
    function stopFollowing() {
      if (follow.checked) follow.checked = false;
    }
    window.addEventListener(
      'scroll',
      () => {
        const y = window.scrollY;
        // Up, by the user: not this script, and not the page shrinking under a reader who is
        // still at the end (a snapshot re-render, the errors-only filter).
        if (!autoScroll && y < lastY - 2 && !atEnd()) stopFollowing();
        lastY = y;
      },
      { passive: true },
    );
    window.addEventListener('wheel', (e) => e.deltaY < 0 && stopFollowing(), { passive: true });
    window.addEventListener('keydown', (e) => {
      if (['ArrowUp', 'PageUp', 'Home'].includes(e.key)) stopFollowing();
    });
    follow.addEventListener('change', scrollToEnd);
    errorsOnly.addEventListener('change', () => {
      body.classList.toggle('errors-only', errorsOnly.checked);
      lastY = window.scrollY;
      if (follow.checked) scrollToEnd();
    });

    function showTarget() {
      const row = rows.get(target);
      if (!row) return;
      document.querySelectorAll('.row.target').forEach((r) => r.classList.remove('target'));
      row.classList.add('target');
      for (let up = row.parentElement; up && up !== timeline; up = up.parentElement) {
        up.classList.remove('collapsed');
      }
      stopFollowing();
      row.scrollIntoView({ block: 'center' });
      target = 0;
    }
    window.addEventListener('hashchange', () => {
      target = permalink();
      showTarget();
    });

    // A row: `.line` (seq link, clock, content) and, for turns and gates, `.children`.
    function frameRow(frame, container) {
      const row = el('div', 'row k-' + token(frame.body.type));
      row.dataset.seq = frame.seq;
      row.id = 'seq-' + frame.seq;
      const line = el('div', 'line');
      const seq = link('#seq-' + frame.seq, String(frame.seq));
      seq.className = 'seq';
      const content = el('div', 'content');
      line.append(seq, el('span', 'clock', clock(frame.at)), content);
      row.append(line);
      if (container) {
        const twisty = el('button', 'twisty', '');
        twisty.type = 'button';
        twisty.title = 'expand or collapse';
        twisty.addEventListener('click', () => row.classList.toggle('collapsed'));
        line.insertBefore(twisty, content);
        row.append(el('div', 'children'));
      }
      return { row, content };
    }

    function markError(row) {
      row.classList.add('is-error');
      for (let up = row.parentElement; up && up !== timeline; up = up.parentElement) {
        if (up.classList.contains('row')) up.classList.add('has-error');
      }
    }

    function details(summary, text, open, className) {
      const d = el('details', className || null);
      const s = el('summary');
      s.append(...(Array.isArray(summary) ? summary : [summary]));
      d.append(s, el('pre', null, text));
      d.open = !!open;
      return d;
    }

    function firstLine(text, max) {
      const line = String(text).split('\n', 1)[0];
      return line.length > max ? line.slice(0, max) + '…' : line;
    }

    function tokensText(t) {
      if (!t) return '';
      const parts = [];
      if (t.input != null) parts.push('in ' + t.input.toLocaleString());
      if (t.output != null) parts.push('out ' + t.output.toLocaleString());
      if (t.cache_read != null) parts.push('cache read ' + t.cache_read.toLocaleString());
      if (t.cache_write != null) parts.push('cache write ' + t.cache_write.toLocaleString());
      let text = parts.length ? parts.join(' · ') + ' tokens' : '';
      if (t.cost_usd != null) text += (text ? ' · ' : '') + '$' + Number(t.cost_usd).toFixed(4);
      return text;
    }

    // Builds the row of one frame; returns it with what it does to the rows before it.
    function render(frame) {
      const b = frame.body;
      const container = b.type === 'turn-started' || b.type === 'gate-started';
      const { row, content } = frameRow(frame, container);
      let error = false;
      switch (b.type) {
        case 'goal-state':
          content.append(muted('goal'), ' ', badge(b.state));
          if (b.reason) content.append(' ', el('strong', null, b.reason));
          if (b.detail) content.append(' ', el('span', 'detail', b.detail));
          error = b.state === 'paused';
          break;
        case 'run-started': {
          content.append(el('strong', null, b.kind + ' run'), ' ', muted('in'), ' ', el('span', 'path', b.worktree));
          const ol = el('ol', 'gate-list');
          for (const g of b.gates || []) {
            const li = el('li');
            li.append(code(g));
            ol.append(li);
          }
          content.append(ol);
          break;
        }
        case 'run-finished':
          // A run closed because its process was gone has no exit code.
          const exit = b.exit_code == null ? 'exit code unknown' : 'exit ' + b.exit_code;
          content.append(el('strong', null, 'run finished'), ' ', badge(b.result), ' ', muted(exit + ' · ' + duration(b.duration_ms)));
          error = FAILING.has(b.result);
          break;
        case 'turn-started':
          row.dataset.turn = b.turn;
          content.append(el('strong', 'turn-title', 'Turn ' + b.turn), ' ');
          content.append(details([muted('prompt'), b.truncated ? muted(' (cut)') : ''], b.prompt, false, 'prompt'));
          break;
        case 'activity':
          row.classList.add('a-' + token(b.kind));
          content.append(el('div', 'activity', b.text));
          break;
        case 'tool-call': {
          const status = badge(b.status === 'started' ? 'running' : b.status);
          status.classList.add('tool-status');
          const d = el('details', 'tool');
          const s = el('summary');
          if (b.status === 'started') {
            // The call: its name and input; the result row below carries the output.
            s.append(el('strong', null, b.name), ' ', code(firstLine(b.input, 120)), ' ', status);
            d.append(s, el('div', 'label', 'input'), el('pre', null, b.input));
          } else {
            s.append(muted('↳ '), el('strong', null, b.name), ' ', status);
            if (!tools.has(b.id)) s.append(' ', code(firstLine(b.input, 120)));
            d.append(s);
            if (!tools.has(b.id)) d.append(el('div', 'label', 'input'), el('pre', null, b.input));
            d.append(el('div', 'label', 'output'), el('pre', null, b.output == null ? '' : b.output));
          }
          content.append(d);
          if (b.status === 'started') {
            tools.set(b.id, row);
          } else {
            const start = tools.get(b.id);
            if (start) {
              const old = start.querySelector('.tool-status');
              const now = badge(b.status);
              now.classList.add('tool-status');
              if (old) old.replaceWith(now);
              if (b.status === 'error') markError(start);
            }
          }
          if (b.status === 'error') {
            error = true;
            d.open = true;
          }
          break;
        }
        case 'turn-ended': {
          content.append(muted('turn ' + b.turn + ' ended'), ' ', badge(b.outcome));
          if (b.reason) content.append(' ', el('strong', null, b.reason));
          const facts = [];
          if (b.wall_ms != null) facts.push(duration(b.wall_ms));
          const tokens = tokensText(b.tokens);
          if (tokens) facts.push(tokens);
          if (facts.length) content.append(' ', muted(facts.join(' · ')));
          if (b.reply) content.append(details(muted('reply'), b.reply, false, 'reply'));
          error = b.outcome === 'error';
          break;
        }
        case 'gate-started':
          row.dataset.gate = b.gate;
          content.append(muted('gate ' + b.gate + '/' + b.of), ' ', code(b.command), ' ');
          content.append(badge('running'));
          content.lastChild.classList.add('gate-verdict');
          break;
        case 'gate-output':
          content.append(el('pre', 'out', b.text));
          if (b.dropped) content.append(muted('… ' + b.dropped + ' bytes left out'));
          break;
        case 'gate-finished': {
          content.append(badge(b.verdict), ' ', muted('gate ' + b.gate), ' ', code(b.command));
          const facts = [];
          if (b.exit_code != null) facts.push('exit ' + b.exit_code);
          if (b.duration_ms != null) facts.push(duration(b.duration_ms));
          if (b.replayed) facts.push('replayed: the workspace had not changed');
          if (facts.length) content.append(' ', muted(facts.join(' · ')));
          error = FAILING.has(b.verdict);
          if (b.digest) content.append(details(muted(error ? 'digest' : 'output'), b.digest, error, 'digest'));
          break;
        }
        case 'judge-verdict':
          content.append(muted('judge'), ' ', badge(b.passed ? 'passed' : 'rejected'));
          content.append(details(muted('reply'), b.reply, !b.passed, 'reply'));
          break;
        case 'error':
          content.append(badge('error'), ' ', el('strong', null, b.code), ' ', el('span', 'detail', b.message));
          error = true;
          break;
        default:
          if (String(b.type).startsWith('workflow-')) {
            error = workflowRow(b, content);
            break;
          }
          // A kind this script does not know yet: still one row, so the seqs stay contiguous.
          content.append(muted(String(b.type)), ' ', el('code', null, JSON.stringify(b)));
      }
      return { row, error };
    }

    // A workflow frame: what happened, to which step and member, and its outcome.
    function workflowRow(b, content) {
      const what = String(b.type).slice('workflow-'.length).replace(/-/g, ' ');
      content.append(muted(what));
      if (b.step) content.append(' ', el('strong', null, b.step + (b.item ? ' [' + b.item + ']' : '')));
      if (b.attempt) content.append(' ', muted('attempt ' + b.attempt));
      const word = b.outcome || b.status || (b.passed === true ? 'passed' : b.passed === false ? 'failed' : '');
      if (word) content.append(' ', badge(word));
      if (b.reason) content.append(' ', el('span', 'detail', b.reason));
      if (b.message) content.append(' ', el('span', 'detail', b.message));
      const t = tokensText(b.tokens);
      if (t) content.append(' ', muted(t));
      return b.passed === false || (b.outcome && b.outcome !== 'ok' && b.outcome !== 'landed') || FAILING.has(b.status) || b.type === 'workflow-paused';
    }

    // Turns hold their activity, tool calls, gates and verdict; gates hold their output and
    // result. A row goes into the last container only if that container is the timeline's tail,
    // so document order is always seq order.
    function inTurn(b, turn) {
      switch (b.type) {
        case 'activity':
        case 'tool-call':
        case 'turn-ended':
        case 'judge-verdict':
          return b.turn === turn;
        case 'gate-started':
        case 'gate-finished':
          return b.turn == null || b.turn === turn;
        case 'gate-output':
          return true;
        default:
          return false;
      }
    }

    function place(b, row) {
      let parent = timeline;
      const last = timeline.lastElementChild;
      if (last && last.classList.contains('k-turn-started') && inTurn(b, Number(last.dataset.turn))) {
        parent = last.querySelector(':scope > .children');
      }
      if (b.type === 'gate-output' || b.type === 'gate-finished') {
        const gate = parent.lastElementChild;
        if (gate && gate.classList.contains('k-gate-started') && Number(gate.dataset.gate) === b.gate && !gate.dataset.verdict) {
          parent = gate.querySelector(':scope > .children');
        }
      }
      parent.appendChild(row);
      return parent.closest('.k-gate-started');
    }

    function finishGate(gate, verdict, error) {
      gate.dataset.verdict = verdict;
      const mark = gate.querySelector('.gate-verdict');
      if (mark) {
        const now = badge(verdict);
        now.classList.add('gate-verdict');
        mark.replaceWith(now);
      }
      // The failing gate stays open with its digest; a passing one folds away.
      gate.classList.toggle('collapsed', !error);
      if (error) markError(gate);
    }

    let refreshTimer = 0;
    function refreshSoon() {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(refresh, 250);
    }

    function add(frame) {
      if (!frame || typeof frame !== 'object' || !frame.body) return;
      if (String(frame.stream) !== stream) return;
      const seq = Number(frame.seq);
      if (!Number.isSafeInteger(seq) || seq < 1 || rows.has(seq)) return; // never twice
      const { row, error } = render(frame);
      const gate = place(frame.body, row);
      rows.set(seq, row);
      if (error) markError(row);
      const b = frame.body;
      if (b.type === 'gate-finished' && gate) finishGate(gate, b.verdict, error);
      if (['goal-state', 'turn-started', 'turn-ended', 'gate-finished', 'run-finished', 'judge-verdict'].includes(b.type) || String(b.type).startsWith('workflow-')) {
        refreshSoon();
      }
      if (count) count.textContent = rows.size + (rows.size === 1 ? ' frame' : ' frames');
      const head = $('goal-head-seq');
      if (head) head.textContent = String(Math.max(Number(head.textContent) || 0, seq));
      if (target && seq >= target) showTarget();
      else if (follow.checked) scrollToEnd();
    }

    // The snapshot: the header and the gates, as after a gap or a change of state.
    function refresh() {
      const url = body.dataset.snapshotUrl;
      if (!url) return Promise.resolve();
      return fetch(url, { headers: { Accept: 'application/json' } })
        .then((r) => (r.ok ? r.json() : Promise.reject(new Error(url + ': HTTP ' + r.status))))
        .then((snap) => ({ goal: renderGoalSnapshot, workflow: renderWorkflow }[body.dataset.page] || renderRun)(snap))
        .catch(() => {});
    }

    function resync(message) {
      end('resync');
      const banner = $('banner');
      if (banner) {
        banner.hidden = false;
        const text = $('banner-text');
        if (text && message) text.textContent = message;
        const reload = $('banner-reload');
        if (reload) reload.href = location.pathname + location.search;
      }
      return refresh();
    }

    connect(body.dataset.streamUrl, {
      frame: (data) => {
        try {
          add(JSON.parse(data));
        } catch (_) {
          // not a frame: ignored, the stream goes on
        }
      },
      terminal: (data) => {
        let frame = null;
        try {
          frame = JSON.parse(data);
        } catch (_) {
          // an unreadable terminal frame still ends the stream
        }
        const b = (frame && frame.body) || {};
        if (b.code === 'SEQUENCE_GAP') resync(b.message);
        else {
          if (frame && frame.seq) add(frame);
          end('closed');
        }
      },
    });
    live.resync = resync;
  }

  function renderGoalSnapshot(snap) {
    const g = snap.goal;
    if (!g) return;
    setChildren($('goal-text'), g.text);
    setChildren($('goal-state'), badge(g.state));
    setChildren($('goal-turns'), g.turns_used + '/' + g.max_turns);
    setChildren($('goal-gates'), gatesNode(g));
    setChildren($('goal-agent'), g.agent);
    setChildren($('goal-elapsed'), elapsedNode(g.created_at, g.state === 'active' ? null : g.updated_at));
    setChildren($('goal-worktree'), g.worktree);
    const head = $('goal-head-seq');
    if (head) head.textContent = String(Math.max(Number(head.textContent) || 0, g.head));
    const pause = $('goal-pause');
    if (pause) {
      pause.hidden = !g.pause_reason;
      pause.replaceChildren(el('strong', null, g.pause_reason || ''), ' ', g.pause_detail || '');
    }
    const gates = document.querySelector('#gates tbody');
    if (gates) {
      gates.replaceChildren(
        ...(snap.gates || []).map((gate) => {
          const failed = FAILING.has(gate.last_verdict);
          const tr = el('tr', failed ? 'failing' : null);
          tr.dataset.gate = gate.number;
          const command = cell(code(gate.command));
          if (gate.last_evidence) {
            const d = el('details', 'evidence');
            d.append(el('summary', null, 'evidence'), el('pre', null, gate.last_evidence));
            d.open = failed;
            command.append(d);
          }
          tr.append(cell(gate.number), command, cell(verdictNode(gate.last_verdict)), cell(gate.last_exit_code ?? ''), cell(gate.attempts));
          for (const i of [0, 3, 4]) tr.children[i].className = 'num';
          return tr;
        }),
      );
      const empty = $('gates-empty');
      if (empty) empty.hidden = (snap.gates || []).length > 0;
    }
    const turns = document.querySelector('#turns tbody');
    if (turns) {
      turns.replaceChildren(
        ...(snap.turns || []).map((t) => {
          const tr = el('tr');
          tr.append(cell(t.number), cell(timeNode(t.started_at)), cell(elapsedNode(t.started_at, t.ended_at)), cell(badge(t.outcome || 'running')));
          for (const i of [0, 2]) tr.children[i].className = 'num';
          return tr;
        }),
      );
      setChildren($('turns-count'), String((snap.turns || []).length));
    }
  }

  // The plan's graph from the server's snapshot: the server decides each node's state from the
  // frames (crates/greenlight-server/src/workflow.rs); this only draws it, as the page's HTML does.
  function renderWorkflow(w) {
    if (!w || w.id == null) return;
    setChildren($('wf-name'), w.name);
    setChildren($('wf-status'), badge(w.status));
    setChildren($('wf-reason'), w.reason || '');
    setChildren($('wf-units'), w.units_total == null ? w.units_spent + ' (no limit)' : w.units_spent + '/' + w.units_total);
    setChildren($('wf-worktree'), w.worktree);
    const graph = $('wf-graph');
    if (!graph) return;
    graph.replaceChildren(
      ...(w.nodes || []).map((n) => {
        const li = el('li', n.item == null ? 'wf-node wf-step' : 'wf-node wf-member');
        li.dataset.step = n.step;
        li.dataset.item = n.item == null ? '' : n.item;
        li.dataset.state = n.state;
        li.append(el('span', 'wf-name', n.item == null ? n.step : n.item));
        if (n.kind) li.append(' ', el('span', 'muted wf-kind', n.kind));
        li.append(' ', badge(n.state));
        if (n.detail) li.append(' ', el('span', 'detail wf-detail', n.detail));
        if (n.needs && n.needs.length) li.append(' ', el('span', 'muted wf-needs', 'after ' + n.needs.join(', ')));
        return li;
      }),
    );
    const empty = $('wf-graph-empty');
    if (empty) empty.hidden = (w.nodes || []).length > 0;
  }

  function renderRun(r) {
    if (!r || r.id == null) return;
    setChildren($('run-kind'), r.kind);
    setChildren($('run-result'), badge(r.result || 'running'));
    setChildren($('run-exit'), r.exit_code ?? '');
    setChildren($('run-gates'), String(r.gates));
    setChildren($('run-elapsed'), elapsedNode(r.started_at, r.ended_at));
    setChildren($('run-worktree'), r.worktree);
  }

  if (body.dataset.page === 'goals') goalsPage();
  else if (['goal', 'run', 'workflow'].includes(body.dataset.page)) streamPage();
})();
