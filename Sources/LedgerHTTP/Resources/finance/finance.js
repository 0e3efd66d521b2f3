// The finance page: reads the ledger's documented audit routes with a finance key and draws them.
// Plain SVG, no library: every number shown comes from /v1/audit/summary, /v1/audit/events,
// /v1/audit/restores or /v1/audit/unclassified, and every drawn point opens the rows behind it.
'use strict';

(() => {
  const KEY = 'ledger.financeKey';
  const SVG = 'http://www.w3.org/2000/svg';
  const TYPES = ['purchase', 'renewal', 'refund'];
  const PAGE_SIZE = 100;
  const $ = (id) => document.getElementById(id);

  // ---------- the API ----------

  class APIFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function queryString(params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== undefined && value !== null && value !== '') query.set(name, value);
    }
    const text = query.toString();
    return text ? '?' + text : '';
  }

  async function request(path, params, accept) {
    const key = sessionStorage.getItem(KEY);
    let response;
    try {
      response = await fetch(path + queryString(params), {
        headers: { Authorization: 'Bearer ' + key, Accept: accept || 'application/json' },
        cache: 'no-store', credentials: 'omit',
      });
    } catch (error) {
      throw new APIFailure(0, 'unreachable', 'the ledger did not answer (' + error.message + '); is `ledger serve` running?');
    }
    if (!response.ok) {
      let code = 'http_' + response.status;
      let message = response.status + ' ' + response.statusText;
      try {
        const body = await response.json();
        if (body && body.error) { code = body.error.code; message = body.error.message; }
      } catch (_) { /* not JSON: keep the status line */ }
      throw new APIFailure(response.status, code, message);
    }
    return response;
  }

  async function getJSON(path, params) {
    return (await request(path, params)).json();
  }

  /// Every page of a paged route, following nextCursor.
  async function allPages(path, params, field) {
    const rows = [];
    let cursor;
    do {
      const page = await getJSON(path, Object.assign({}, params, { limit: 10000, cursor }));
      rows.push(...page[field]);
      cursor = page.nextCursor;
    } while (cursor);
    return rows;
  }

  // ---------- money as exact decimals (never floats) ----------

  function decimal(text) {
    let value = String(text || '0');
    const negative = value.startsWith('-');
    if (negative) value = value.slice(1);
    const [whole, fraction = ''] = value.split('.');
    return { units: BigInt((negative ? '-' : '') + ((whole || '0') + fraction)), scale: fraction.length };
  }

  function addDecimals(a, b) {
    const scale = Math.max(a.scale, b.scale);
    const lift = (d) => d.units * 10n ** BigInt(scale - d.scale);
    return { units: lift(a) + lift(b), scale };
  }

  /// Decimal text with at least two fraction digits and no needless trailing zeros beyond them.
  function decimalText(d) {
    const negative = d.units < 0n;
    let digits = (negative ? -d.units : d.units).toString().padStart(d.scale + 1, '0');
    let whole = d.scale ? digits.slice(0, -d.scale) : digits;
    let fraction = d.scale ? digits.slice(-d.scale) : '';
    while (fraction.length > 2 && fraction.endsWith('0')) fraction = fraction.slice(0, -1);
    while (fraction.length < 2) fraction += '0';
    return (negative ? '-' : '') + whole + '.' + fraction;
  }

  const decimalNumber = (d) => Number(d.units) / 10 ** d.scale;
  const ZERO = { units: 0n, scale: 0 };

  // ---------- time buckets (UTC) ----------

  const DAY = 86400000;
  const dayStart = (day) => Date.parse(day + 'T00:00:00Z');
  const isoDay = (ms) => new Date(ms).toISOString().slice(0, 10);
  const iso = (ms) => new Date(ms).toISOString().replace('.000Z', 'Z');

  function bucketOf(day, interval) {
    if (interval === 'month') return day.slice(0, 7);
    if (interval === 'week') {
      const ms = dayStart(day);
      const weekday = (new Date(ms).getUTCDay() + 6) % 7; // Monday 0
      return isoDay(ms - weekday * DAY);
    }
    return day;
  }

  function bucketRange(bucket, interval) {
    if (interval === 'month') {
      const [year, month] = bucket.split('-').map(Number);
      return [Date.UTC(year, month - 1, 1), Date.UTC(year, month, 1)];
    }
    const start = dayStart(bucket);
    return [start, start + (interval === 'week' ? 7 : 1) * DAY];
  }

  function nextBucket(bucket, interval) {
    return bucketOf(isoDay(bucketRange(bucket, interval)[1]), interval);
  }

  const bucketLabel = (bucket, interval) => (interval === 'week' ? 'week of ' + bucket : bucket);

  /// Every bucket from the first to the last, gaps included, so a chart's x axis is time.
  function bucketSpan(firstDay, lastDay, interval) {
    const buckets = [];
    let bucket = bucketOf(firstDay, interval);
    const last = bucketOf(lastDay, interval);
    while (bucket <= last && buckets.length < 1000) {
      buckets.push(bucket);
      bucket = nextBucket(bucket, interval);
    }
    return buckets;
  }

  /// A bucket's [start, end) cut to the filter's period, as the audit routes' from and to.
  function bucketQuery(bucket, filters) {
    let [start, end] = bucketRange(bucket, filters.interval);
    if (filters.from) start = Math.max(start, Date.parse(filters.from));
    if (filters.to) end = Math.min(end, Date.parse(filters.to));
    return { from: iso(start), to: iso(end) };
  }

  // ---------- filters ----------

  function readFilters() {
    const form = $('filters');
    const from = form.elements.from.value;
    const to = form.elements.to.value;
    const types = TYPES.filter((type) => form.querySelector('input[name=type][value=' + type + ']').checked);
    return {
      from: from ? from + 'T00:00:00Z' : undefined,
      to: to ? to + 'T00:00:00Z' : undefined,
      productId: form.elements.productId.value || undefined,
      userId: form.elements.userId.value.trim() || undefined,
      types,
      environment: form.elements.environment.value,
      interval: form.elements.interval.value,
    };
  }

  /// The audit routes' filter for these choices (type left out when every type is chosen).
  function baseQuery(filters, types) {
    const chosen = types || filters.types;
    return {
      from: filters.from, to: filters.to, productId: filters.productId, userId: filters.userId, environment: filters.environment,
      type: chosen.length === TYPES.length ? undefined : chosen.join(','),
    };
  }

  /// Buckets covering the filter's period, or the data's days when the period is open.
  function bucketsFor(filters, days) {
    const known = days.filter(Boolean).sort();
    const first = filters.from ? filters.from.slice(0, 10) : known[0];
    const last = filters.to ? isoDay(Date.parse(filters.to) - 1) : known[known.length - 1];
    if (!first || !last || first > last) return [];
    return bucketSpan(first, last, filters.interval);
  }

  // ---------- drawing ----------

  function element(name, attributes, children) {
    const node = document.createElement(name);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === 'text') node.textContent = value;
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else if (value !== undefined && value !== null) node.setAttribute(key, value);
    }
    for (const child of children || []) if (child) node.append(child);
    return node;
  }

  function svgElement(name, attributes) {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
    return node;
  }

  function niceStep(range) {
    const raw = range / 4;
    const power = 10 ** Math.floor(Math.log10(raw || 1));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw);
    return step || power * 10;
  }

  /// A grouped bar chart. Each series: {name, values (numbers), texts (what to say), drill(i)}.
  /// Bars are links: Enter or a click opens the audit rows behind the number.
  function barChart(title, labels, series) {
    const width = 800, height = 260, left = 64, right = 8, top = 12, bottom = 42;
    const values = series.flatMap((s) => s.values);
    const counts = values.every(Number.isInteger) && series.every((s) => s.texts.every((t) => !t.includes('.')));
    const rawStep = niceStep(Math.max(...values, 0) - Math.min(...values, 0));
    const step = counts ? Math.max(1, Math.ceil(rawStep)) : rawStep; // counts have whole ticks
    const max = Math.max(step, Math.ceil(Math.max(...values, 0) / step) * step);
    const min = Math.min(0, Math.floor(Math.min(...values, 0) / step) * step);
    const y = (v) => top + ((max - v) / (max - min)) * (height - top - bottom);
    const svg = svgElement('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': title + ' (numbers in the table below)' });
    const titleNode = svgElement('title');
    titleNode.textContent = title;
    svg.append(titleNode);
    for (let tick = min; tick <= max + step / 2; tick += step) {
      svg.append(svgElement('line', { x1: left, x2: width - right, y1: y(tick), y2: y(tick), class: 'axis' }));
      const text = svgElement('text', { x: left - 6, y: y(tick) + 4, 'text-anchor': 'end', class: 'tick' });
      text.textContent = Number(tick.toFixed(6)).toLocaleString('en-US');
      svg.append(text);
    }
    const group = (width - left - right) / Math.max(labels.length, 1);
    const bar = Math.max(1, Math.min(28, (group * 0.8) / series.length));
    const every = Math.ceil(labels.length / 10);
    labels.forEach((label, i) => {
      const x0 = left + i * group + (group - bar * series.length) / 2;
      series.forEach((s, j) => {
        const value = s.values[i];
        if (!value) return;
        const link = svgElement('a', { href: '#drill', 'aria-label': `${s.name}, ${label}: ${s.texts[i]}`, 'data-series': s.name, 'data-bucket': label });
        const tooltip = svgElement('title');
        tooltip.textContent = `${s.name}, ${label}: ${s.texts[i]}`;
        link.append(tooltip);
        link.append(svgElement('rect', {
          x: x0 + j * bar, y: Math.min(y(value), y(0)), width: Math.max(bar - 1, 1),
          height: Math.max(Math.abs(y(value) - y(0)), 1), class: 's' + (s.color ?? j),
        }));
        link.addEventListener('click', (event) => { event.preventDefault(); openDrill(s.drill(i)); });
        svg.append(link);
      });
      if (i % every === 0) {
        const text = svgElement('text', { x: left + i * group + group / 2, y: height - bottom + 16, 'text-anchor': 'middle', class: 'label' });
        text.textContent = label;
        svg.append(text);
      }
    });
    const legend = element('ul', { class: 'legend' }, series.map((s, j) =>
      element('li', {}, [element('span', { class: 'swatch s' + (s.color ?? j), 'aria-hidden': 'true' }), document.createTextNode(s.name)])));
    return element('div', { class: 'chart' }, [svg, legend]);
  }

  /// The numbers of a chart as a table; each number opens its rows; the CSVs are the rows behind the whole table.
  /// `downloads`: one query, or several as [{label, spec}] (a table drawn from two routes).
  function numbersTable(caption, labels, series, downloads) {
    const links = Array.isArray(downloads) ? downloads : [{ label: 'Download the rows behind this table (CSV)', spec: downloads }];
    const head = element('tr', {}, [element('th', { scope: 'col', text: 'Interval' }),
      ...series.map((s) => element('th', { scope: 'col', class: 'number', text: s.name }))]);
    const body = labels.map((label, i) => element('tr', { 'data-bucket': label }, [
      element('th', { scope: 'row', text: label }),
      ...series.map((s) => element('td', { class: 'number', 'data-series': s.name }, [
        s.values[i] ? element('button', { type: 'button', class: 'cell', text: s.texts[i], 'aria-label': `${s.name}, ${label}: ${s.texts[i]}, show the rows`, onclick: () => openDrill(s.drill(i)) })
          : document.createTextNode(s.texts[i]),
      ])),
    ]));
    const table = element('table', {}, [element('caption', { class: 'hint', text: caption }), element('thead', {}, [head]), element('tbody', {}, body)]);
    return element('details', { class: 'numbers' }, [
      element('summary', { text: 'Numbers: ' + caption }),
      element('div', { class: 'table-wrap' }, [table]),
      ...links.map((link) => element('button', { type: 'button', class: 'download', text: link.label, onclick: () => downloadCSV(link.spec) })),
    ]);
  }

  function empty(text) {
    return element('p', { class: 'empty', text });
  }

  // ---------- the charts ----------

  function environmentWords(environment) {
    return environment === 'sandbox' ? 'sandbox (test money, not revenue)' : environment;
  }

  /// Gross, refunds, net and net proceeds per interval, one chart per currency (and environment
  /// when both are read). Proceeds in the chart's currency are drawn beside the money; proceeds
  /// Apple pays in another currency, and rows whose proceeds are unknown, are named under it.
  function drawMoney(filters, rows) {
    const box = $('money');
    box.replaceChildren();
    const groups = new Map();
    for (const row of rows) {
      if (!row.currency) continue; // unpriced rows: in the warnings, in no amount
      const key = row.currency + (row.environment ? ' · ' + row.environment : '');
      if (!groups.has(key)) groups.set(key, { currency: row.currency, environment: row.environment, rows: [] });
      groups.get(key).rows.push(row);
    }
    if (groups.size === 0) {
      box.append(empty(emptyText(filters, 'priced money events')));
      return;
    }
    const buckets = bucketsFor(filters, rows.map((row) => row.day));
    const takenTypes = filters.types.filter((t) => t !== 'refund');
    for (const [key, group] of [...groups.entries()].sort()) {
      const totals = buckets.map(() => ({ gross: ZERO, refunds: ZERO, net: ZERO, proceeds: ZERO }));
      const elsewhere = new Map(); // proceeds currency → net proceeds not in this currency's chart
      const sources = new Set();
      let unknown = 0;
      for (const row of group.rows) {
        const index = buckets.indexOf(bucketOf(row.day, filters.interval));
        if (index < 0) continue;
        const t = totals[index];
        t.gross = addDecimals(t.gross, decimal(row.gross));
        t.refunds = addDecimals(t.refunds, decimal(row.refundedAmount));
        t.net = addDecimals(t.net, decimal(row.net));
        unknown += row.proceedsUnknown || 0;
        if (row.netProceeds == null) continue;
        sources.add(row.proceedsSource);
        if (row.proceedsCurrency === group.currency) t.proceeds = addDecimals(t.proceeds, decimal(row.netProceeds));
        else elsewhere.set(row.proceedsCurrency, addDecimals(elsewhere.get(row.proceedsCurrency) || ZERO, decimal(row.netProceeds)));
      }
      const scope = { currency: group.currency, environment: group.environment || filters.environment };
      const drill = (types, what) => (i) => ({
        title: `${what}, ${group.currency}, ${bucketLabel(buckets[i], filters.interval)}`,
        route: 'events', params: Object.assign(baseQuery(filters, types), bucketQuery(buckets[i], filters), scope),
      });
      const series = [];
      const measure = (name, field, types, color) => series.push({
        name, color, values: totals.map((t) => decimalNumber(t[field])), texts: totals.map((t) => decimalText(t[field])), drill: drill(types, name),
      });
      if (takenTypes.length) measure('Gross', 'gross', takenTypes, 0);
      if (filters.types.includes('refund')) measure('Refunds', 'refunds', ['refund'], 1);
      measure('Net', 'net', filters.types, 2);
      if (sources.size) measure('Net proceeds', 'proceeds', filters.types, 4);
      const labels = buckets.map((b) => bucketLabel(b, filters.interval));
      const title = `${group.currency}${group.environment ? ' (' + environmentWords(group.environment) + ')' : ''}: gross, refunds, net and net proceeds per ${filters.interval}`;
      box.append(element('section', { class: 'currency', 'data-currency': group.currency, 'data-environment': group.environment || filters.environment }, [
        element('h3', { text: key }),
        barChart(title, labels, series),
        proceedsNote(sources, unknown, elsewhere),
        numbersTable(title, labels, series, { route: 'events', params: Object.assign(baseQuery(filters), scope) }),
      ]));
    }
  }

  /// Where a chart's proceeds come from, and what it leaves out.
  function proceedsNote(sources, unknown, elsewhere) {
    const words = {
      apple_report: "Apple's sales reports", 'estimate:standard': 'estimates at the standard commission',
      'estimate:small_business': 'estimates at the Small Business Program rate', 'estimate:after_one_year': 'estimates at the rate after a year of paid service',
      'estimate:standard+after_one_year': 'estimates at both subscription rates', free: 'rows that moved no money', mixed: 'several sources', unknown: 'nothing known',
    };
    const parts = [];
    if (sources.size) parts.push('Proceeds from ' + [...sources].sort().map((s) => words[s] || s).join(', ') + '.');
    else parts.push('No proceeds known: import Apple\'s sales reports, or set tax rates for estimates (see docs/finance.md).');
    if (unknown) parts.push(`${unknown} row${unknown === 1 ? "'s" : "s'"} proceeds unknown, in no proceeds figure.`);
    for (const [currency, amount] of [...elsewhere.entries()].sort()) parts.push(`Net proceeds paid in ${currency}: ${decimalText(amount)} (not drawn here).`);
    return element('p', { class: 'proceeds-note', 'data-proceeds-unknown': String(unknown), text: parts.join(' ') });
  }

  /// The months the metrics cover: the filters' period, else the last twelve months (UTC).
  function metricsPeriod(filters) {
    const now = new Date();
    const to = filters.to || iso(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    const from = filters.from || iso(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 11, 1));
    return { from, to };
  }

  /// MRR, and subscriptions new, reactivated, churned and active, per month, one pair of charts per currency.
  function drawMetrics(filters, report) {
    const box = $('metrics');
    box.replaceChildren();
    if (!report) {
      box.append(empty('Metrics are per environment: choose Production or Sandbox.'));
      return;
    }
    const currencies = [...new Set(report.subscriptions.map((row) => row.currency))].sort();
    if (currencies.length === 0) {
      box.append(empty(emptyText(filters, 'auto-renewable subscriptions')));
      return;
    }
    const months = [...new Set(report.subscriptions.map((row) => row.interval))].sort();
    for (const currency of currencies) {
      const of = (month) => report.subscriptions.find((row) => row.interval === month && row.currency === currency);
      const drill = (name) => (i) => {
        const [year, month] = months[i].split('-').map(Number);
        return { title: `${name}, ${currency}, ${months[i]}`, route: 'events',
          params: { from: iso(Date.UTC(year, month - 1, 1)), to: iso(Date.UTC(year, month, 1)), productType: 'auto_renewable', type: 'purchase,renewal',
            currency, environment: report.environment } };
      };
      const figure = (name, field, color, money) => {
        const values = months.map((m) => (of(m) ? of(m)[field] : 0));
        return { name, color, values: values.map((v) => (money ? decimalNumber(decimal(v)) : v)), texts: values.map((v) => (money ? decimalText(decimal(v)) : String(v))), drill: drill(name) };
      };
      const mrr = [figure('MRR', 'mrr', 0, true)];
      const movement = [figure('New', 'new', 2), figure('Reactivated', 'reactivated', 3), figure('Churned', 'churned', 1), figure('Active at end', 'activeAtEnd', 4)];
      const trials = [figure('Trials started', 'trialsStarted', 5), figure('Converted', 'trialsConverted', 2), figure('Expired', 'trialsExpired', 1)];
      // Rates as exact decimals; a month without a denominator shows a dash. Refund rates cover every product type.
      const refundOf = (month) => report.refunds.find((row) => row.interval === month && row.currency === currency);
      const rate = (name, color, valueOf, drillOf) => {
        const values = months.map(valueOf);
        return { name, color, values: values.map((v) => (v == null ? 0 : decimalNumber(decimal(v)))), texts: values.map((v) => (v == null ? '–' : v)), drill: drillOf };
      };
      const moneyDrill = (name) => (i) => {
        const [year, month] = months[i].split('-').map(Number);
        return { title: `${name}, ${currency}, ${months[i]}`, route: 'events',
          params: { from: iso(Date.UTC(year, month - 1, 1)), to: iso(Date.UTC(year, month, 1)), currency, environment: report.environment } };
      };
      const rates = [
        rate('Churn rate', 1, (m) => (of(m) ? of(m).churnRate : null), drill('Churn rate')),
        rate('Refund rate (count)', 0, (m) => (refundOf(m) ? refundOf(m).refundRateByCount : null), moneyDrill('Refund rate (count)')),
        rate('Refund rate (amount)', 3, (m) => (refundOf(m) ? refundOf(m).refundRateByAmount : null), moneyDrill('Refund rate (amount)')),
      ];
      const closed = report.refunds.filter((row) => row.currency === currency && row.basis === 'closed');
      const spec = { route: 'events', params: { productType: 'auto_renewable', currency, environment: report.environment } };
      box.append(element('section', { class: 'metrics', 'data-currency': currency }, [
        element('h3', { text: `${currency} (${report.environment})` }),
        barChart(`${currency}: monthly recurring revenue at each month's end`, months, mrr),
        numbersTable(`${currency}: monthly recurring revenue`, months, mrr, spec),
        barChart(`${currency}: subscriptions new, reactivated, churned and active per month`, months, movement),
        numbersTable(`${currency}: subscriptions per month`, months, movement, spec),
        barChart(`${currency}: free trials started, converted and expired per month`, months, trials),
        numbersTable(`${currency}: free trials per month`, months, trials, spec),
        barChart(`${currency}: churn rate and refund rates per month`, months, rates),
        numbersTable(`${currency}: churn rate and refund rates per month`, months, rates, { route: 'events', params: { currency, environment: report.environment } }),
        cohortTable(report, currency),
        closed.length === 0 ? document.createTextNode('')
          : element('p', { class: 'hint closed-rates', text: `Refund rates of closed months come from their close plus the adjustments booked since: ${closed.map((row) => `${row.interval} (closed ${row.closedAt.slice(0, 10)}, ${row.adjustments} adjustment${row.adjustments === 1 ? '' : 's'})`).join(', ')}.` }),
      ]));
    }
  }

  /// The cohort table of a currency: users by the month of their first payment (rows), their net
  /// money in each month since (columns), and how many of them had a row that month.
  function cohortTable(report, currency) {
    const cells = report.cohorts.filter((cell) => cell.currency === currency);
    if (cells.length === 0) return document.createTextNode('');
    const cohorts = [...new Set(cells.map((cell) => cell.cohort))].sort();
    const span = Math.max(...cells.map((cell) => cell.monthsSince));
    const head = element('tr', {}, [element('th', { scope: 'col', text: 'First payment' }),
      ...Array.from({ length: span + 1 }, (_, k) => element('th', { scope: 'col', class: 'number', text: `Month ${k}` }))]);
    const body = cohorts.map((cohort) => element('tr', { 'data-cohort': cohort }, [
      element('th', { scope: 'row', text: cohort }),
      ...Array.from({ length: span + 1 }, (_, k) => {
        const cell = cells.find((c) => c.cohort === cohort && c.monthsSince === k);
        return element('td', { class: 'number', 'data-months-since': String(k), title: cell ? `${cell.users} user${cell.users === 1 ? '' : 's'} with a row` : '',
          text: cell ? decimalText(decimal(cell.net)) : '' });
      }),
    ]));
    const caption = `${currency}: net money of each cohort (users by the month of their first payment) in each month since`;
    return element('details', { class: 'numbers cohorts', 'data-currency': currency }, [
      element('summary', { text: 'Cohorts: ' + caption }),
      element('div', { class: 'table-wrap' }, [element('table', {}, [element('caption', { class: 'hint', text: caption }),
        element('thead', {}, [head]), element('tbody', {}, body)])]),
    ]);
  }

  /// The closed months, each with its adjustments a click away; the money panel names those the filters cover.
  function drawPeriods(filters, periods) {
    const box = $('periods');
    box.replaceChildren();
    $('adjustments').replaceChildren();
    const covered = periods.filter((p) => p.state === 'closed' && (!filters.to || Date.parse(p.from) < Date.parse(filters.to))
      && (!filters.from || Date.parse(p.to) > Date.parse(filters.from)));
    const note = $('closed-note');
    note.hidden = covered.length === 0;
    note.textContent = covered.length === 0 ? '' : `Closed months in this period: ${covered.map((p) => p.period).join(', ')}. The charts show the audit trail as it is now; each closed month's frozen figures and the adjustments learned since are under “Closed months”.`;
    if (periods.length === 0) {
      box.append(empty('No month is closed yet: `ledger audit close --app … --period yyyy-MM --key FILE`.'));
      return;
    }
    const head = element('tr', {}, ['Month', 'State', 'Closed at', 'By', 'Figures at position', 'Signature', 'Frozen net', ''].map((c) => element('th', { scope: 'col', text: c })));
    const body = periods.map((p) => {
      const nets = new Map();
      for (const f of p.figures) if (f.currency && f.environment === 'production') nets.set(f.currency, addDecimals(nets.get(f.currency) || ZERO, decimal(f.net)));
      return element('tr', { 'data-period': p.period, 'data-state': p.state }, [
        element('td', { text: p.period }), element('td', { text: p.state }), element('td', { text: p.closedAt }), element('td', { text: p.closedBy }),
        element('td', { text: String(p.closePosition) }), element('td', { 'data-column': 'signature', text: p.signatureValid ? 'valid' : 'INVALID' }),
        element('td', { 'data-column': 'net', text: [...nets.entries()].sort().map(([c, v]) => `${decimalText(v)} ${c}`).join(', ') || '–' }),
        element('td', {}, [element('button', { type: 'button', class: 'cell', text: 'Adjustments', onclick: () => showAdjustments(p.period) })]),
      ]);
    });
    box.append(element('div', { class: 'table-wrap' }, [element('table', { id: 'periods-table' }, [element('thead', {}, [head]), element('tbody', {}, body)])]));
  }

  /// What the ledger learned after a month was closed that changes its rows, and why.
  async function showAdjustments(period) {
    const box = $('adjustments');
    try {
      const answer = await getJSON('/v1/audit/adjustments', { period });
      const head = element('tr', {}, ['Booked in', 'Kind', 'Event', 'Transaction', 'Product', 'Currency', 'Net change', 'Cause'].map((c) => element('th', { scope: 'col', text: c })));
      const rows = answer.adjustments.map((a) => element('tr', { 'data-position': String(a.position), 'data-kind': a.kind }, [
        element('td', { text: a.bookedIn }), element('td', { text: a.kind }), element('td', { text: a.event }), element('td', { text: a.transactionId }),
        element('td', { text: a.productId }), element('td', { text: a.currency || '' }), element('td', { 'data-column': 'netChange', text: a.netChange }),
        element('td', { text: a.cause.message }),
      ]));
      box.replaceChildren(
        element('h3', { id: 'adjustments-title', text: `Adjustments to ${period}: ${answer.adjustments.length}` }),
        answer.adjustments.length ? element('div', { class: 'table-wrap' }, [element('table', { id: 'adjustments-table' }, [element('thead', {}, [head]), element('tbody', {}, rows)])])
          : empty(`Nothing learned since ${period} was closed changes its rows.`),
        element('button', { type: 'button', class: 'download', id: 'adjustments-csv', text: 'Download the adjustments (CSV)',
          onclick: () => downloadCSV({ route: 'adjustments', params: { period } }) }),
      );
    } catch (error) {
      failed(error);
    }
  }

  /// How many purchases, renewals and refunds per interval, all currencies together (counts, not money).
  function drawCounts(filters, byType) {
    const box = $('counts');
    box.replaceChildren();
    const days = Object.values(byType).flat().map((row) => row.day);
    const buckets = bucketsFor(filters, days);
    if (buckets.length === 0 || days.length === 0) {
      box.append(empty(emptyText(filters, 'purchases, renewals or refunds')));
      return;
    }
    const names = { purchase: 'Purchases', renewal: 'Renewals', refund: 'Refunds' };
    const colors = { purchase: 0, renewal: 3, refund: 1 };
    const series = filters.types.map((type) => {
      const counts = buckets.map(() => 0);
      for (const row of byType[type] || []) {
        const index = buckets.indexOf(bucketOf(row.day, filters.interval));
        if (index >= 0) counts[index] += type === 'refund' ? row.refunds : row.purchases;
      }
      return {
        name: names[type], color: colors[type], values: counts, texts: counts.map(String),
        drill: (i) => ({ title: `${names[type]}, ${bucketLabel(buckets[i], filters.interval)}`, route: 'events',
          params: Object.assign(baseQuery(filters, [type]), bucketQuery(buckets[i], filters)) }),
      };
    });
    const labels = buckets.map((b) => bucketLabel(b, filters.interval));
    const title = `Purchases, renewals and refunds per ${filters.interval} (counts of rows, every currency)`;
    box.append(barChart(title, labels, series), numbersTable(title, labels, series, { route: 'events', params: baseQuery(filters) }));
  }

  /// Subscriptions with a paid, unrefunded period in each interval, by product.
  function drawSubscriptions(filters, rows) {
    const box = $('subscriptions');
    box.replaceChildren();
    const periods = rows.filter((row) => row.productType === 'auto_renewable' && !row.revoked && row.expiresDate);
    if (periods.length === 0) {
      box.append(empty(emptyText(filters, 'auto-renewable subscription periods')));
      return;
    }
    const today = isoDay(Date.now());
    const lastExpiry = periods.map((p) => p.expiresDate.slice(0, 10)).sort().pop();
    const days = [...periods.map((p) => p.purchaseDate.slice(0, 10)), lastExpiry < today ? lastExpiry : today];
    const buckets = bucketsFor(filters, days);
    const products = [...new Set(periods.map((p) => p.productId))].sort();
    const series = products.map((product, j) => {
      const counts = buckets.map((bucket) => {
        const range = bucketQuery(bucket, filters);
        const start = Date.parse(range.from), end = Date.parse(range.to);
        const active = new Set();
        for (const p of periods) {
          if (p.productId === product && Date.parse(p.purchaseDate) < end && Date.parse(p.expiresDate) > start) active.add(p.originalTransactionId);
        }
        return active.size;
      });
      return {
        name: product, color: j % 6, values: counts, texts: counts.map(String),
        drill: (i) => {
          const range = bucketQuery(buckets[i], filters);
          return {
            title: `Active ${product}, ${bucketLabel(buckets[i], filters.interval)}`, route: 'events',
            params: { productId: product, userId: filters.userId, type: 'purchase,renewal', productType: 'auto_renewable', to: range.to, environment: filters.environment },
            note: `The ${counts[i]} subscriptions counted are the original transactions of the rows marked “active”: a period [purchase date, expires date) that overlaps ${range.from} – ${range.to} and was not refunded.`,
            mark: (row) => row.productType === 'auto_renewable' && !row.revoked && row.expiresDate
              && Date.parse(row.purchaseDate) < Date.parse(range.to) && Date.parse(row.expiresDate) > Date.parse(range.from),
          };
        },
      };
    });
    const labels = buckets.map((b) => bucketLabel(b, filters.interval));
    const title = `Active auto-renewable subscriptions per ${filters.interval}, by product`;
    box.append(barChart(title, labels, series), numbersTable(title, labels, series, {
      route: 'events', params: { productId: filters.productId, userId: filters.userId, type: 'purchase,renewal', productType: 'auto_renewable', to: filters.to, environment: filters.environment },
    }));
  }

  /// Non-renewing periods sold, and the ledger's restores of them to new devices, per interval and product.
  function drawNonRenewing(filters, sold, restores) {
    const box = $('nonrenewing');
    box.replaceChildren();
    const restored = restores.filter((row) => row.restoredAt);
    if (sold.length === 0 && restored.length === 0) {
      box.append(empty(emptyText(filters, 'non-renewing subscription periods sold or restored')));
      return;
    }
    const buckets = bucketsFor(filters, [...sold.map((r) => r.occurredAt.slice(0, 10)), ...restored.map((r) => r.restoredAt.slice(0, 10))]);
    const products = [...new Set([...sold.map((r) => r.productId), ...restored.map((r) => r.productId || '(unknown)')])].sort();
    const series = [];
    products.forEach((product, j) => {
      const count = (list, day) => buckets.map((bucket) => list.filter((r) => (r.productId || '(unknown)') === product
        && bucketOf(day(r).slice(0, 10), filters.interval) === bucket).length);
      const soldCounts = count(sold, (r) => r.occurredAt);
      const restoredCounts = count(restored, (r) => r.restoredAt);
      series.push({
        name: `${product}: sold`, color: (2 * j) % 6, values: soldCounts, texts: soldCounts.map(String),
        drill: (i) => ({ title: `${product} sold, ${bucketLabel(buckets[i], filters.interval)}`, route: 'events',
          params: Object.assign({ productId: product, userId: filters.userId, type: 'purchase', productType: 'non_renewing', environment: filters.environment }, bucketQuery(buckets[i], filters)) }),
      });
      series.push({
        name: `${product}: restored to new devices`, color: 4, values: restoredCounts, texts: restoredCounts.map(String),
        drill: (i) => ({ title: `${product} restored to new devices, ${bucketLabel(buckets[i], filters.interval)}`, route: 'restores',
          params: Object.assign({ productId: product === '(unknown)' ? undefined : product, userId: filters.userId, environment: filters.environment }, bucketQuery(buckets[i], filters)) }),
      });
    });
    const labels = buckets.map((b) => bucketLabel(b, filters.interval));
    const title = `Non-renewing periods sold and restored to new devices per ${filters.interval}`;
    const scope = { from: filters.from, to: filters.to, productId: filters.productId, userId: filters.userId, environment: filters.environment };
    box.append(barChart(title, labels, series), numbersTable(title, labels, series, [
      { label: 'Download the periods sold (CSV)', spec: { route: 'events', params: Object.assign({ type: 'purchase', productType: 'non_renewing' }, scope) } },
      { label: 'Download the restores (CSV)', spec: { route: 'restores', params: scope } },
    ]));
  }

  function drawWarnings(filters, unpriced, unclassified) {
    const body = $('warnings-body');
    body.replaceChildren();
    if (unclassified.length) {
      body.append(element('p', { 'data-warning': 'unclassified', text: `${unclassified.length} product${unclassified.length === 1 ? ' was' : 's were'} sold that the catalog does not define: their rows are typed “unknown” until an admin defines them (PUT /v1/apps/{bundleId}/products/{productId}).` }));
      body.append(element('ul', {}, unclassified.map((p) => element('li', {}, [
        element('button', { type: 'button', class: 'cell', text: p.productId, onclick: () => openDrill({ title: `Rows of ${p.productId} (not in the catalog)`, route: 'events', params: { productId: p.productId, environment: filters.environment } }) }),
        document.createTextNode(`: ${count(p.transactions, 'transaction')}, ${count(p.units, 'unit')}, ${count(p.users, 'user')}, bought ${p.firstPurchase.slice(0, 10)} to ${p.lastPurchase.slice(0, 10)}`),
      ]))));
    }
    if (unpriced > 0) {
      body.append(element('p', { 'data-warning': 'unpriced' }, [
        document.createTextNode(`${unpriced} row${unpriced === 1 ? ' has' : 's have'} no price (neither the device nor the catalog gave one) and ${unpriced === 1 ? 'is' : 'are'} in no amount on this page. `),
        element('button', { type: 'button', class: 'cell', text: 'Show them', onclick: () => openDrill({ title: 'Rows without a price', route: 'events', params: Object.assign(baseQuery(filters), { priced: 'false' }) }) }),
      ]));
    }
    $('warnings').hidden = body.childElementCount === 0;
  }

  const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

  function emptyText(filters, what) {
    const hint = filters.environment === 'production' ? ' Test purchases (the demo\u2019s, TestFlight\u2019s) are in the sandbox: choose “Sandbox” above.' : '';
    return `No ${what} in ${filters.environment === 'all' ? 'either environment' : filters.environment} for these filters.${hint}`;
  }

  // ---------- loading ----------

  let loading = 0;

  async function load() {
    const run = ++loading;
    const filters = readFilters();
    const banner = $('environment-banner');
    banner.hidden = filters.environment === 'production';
    banner.textContent = filters.environment === 'sandbox'
      ? 'SANDBOX: test purchases (App Review, TestFlight, developers). This money is not revenue.'
      : 'Production and sandbox side by side: each chart is one environment, never the two added together.';
    if (filters.types.length === 0) return status('Choose at least one event type.', true);
    if (filters.from && filters.to && filters.from >= filters.to) return status('“From” must be before “To”: the period is [from, to).', true);
    status('Loading…');
    try {
      const base = baseQuery(filters);
      const metricsRange = metricsPeriod(filters);
      const [closedMonths, metrics, money, unclassified, products, periods, sold, restores, ...counts] = await Promise.all([
        getJSON('/v1/audit/periods'),
        filters.environment === 'all' ? null : getJSON('/v1/audit/metrics', Object.assign({ environment: filters.environment, interval: 'month' }, metricsRange)),
        getJSON('/v1/audit/summary', Object.assign({ groupBy: 'day,currency' }, base)),
        getJSON('/v1/audit/unclassified'),
        getJSON('/v1/audit/summary', { environment: filters.environment, groupBy: 'product' }),
        allPages('/v1/audit/events', { to: filters.to, productId: filters.productId, userId: filters.userId, environment: filters.environment, type: 'purchase,renewal', productType: 'auto_renewable' }, 'events'),
        allPages('/v1/audit/events', { from: filters.from, to: filters.to, productId: filters.productId, userId: filters.userId, environment: filters.environment, type: 'purchase', productType: 'non_renewing' }, 'events'),
        allPages('/v1/audit/restores', { from: filters.from, to: filters.to, productId: filters.productId, userId: filters.userId, environment: filters.environment }, 'restores'),
        ...filters.types.map((type) => getJSON('/v1/audit/summary', Object.assign({ groupBy: 'day' }, baseQuery(filters, [type])))),
      ]);
      if (run !== loading) return;
      fillProducts(products.rows);
      const byType = {};
      filters.types.forEach((type, i) => { byType[type] = counts[i].rows; });
      drawWarnings(filters, money.rows.reduce((sum, row) => sum + row.unpriced, 0), unclassified.products);
      drawMoney(filters, money.rows);
      drawCounts(filters, byType);
      drawSubscriptions(filters, periods);
      drawNonRenewing(filters, sold, restores);
      drawPeriods(filters, closedMonths.periods);
      drawMetrics(filters, metrics);
      status(`Showing ${environmentWords(filters.environment)}${filters.productId ? ', ' + filters.productId : ''}${filters.userId ? ', user ' + filters.userId : ''}, ${filters.from ? 'from ' + filters.from.slice(0, 10) : 'from the start'} ${filters.to ? 'to ' + filters.to.slice(0, 10) + ' (not included)' : 'to now'}.`);
      document.body.dataset.loaded = String(run);
    } catch (error) {
      if (run === loading) failed(error);
    }
  }

  function fillProducts(rows) {
    const select = $('f-product');
    const chosen = select.value;
    const ids = [...new Set(rows.map((row) => row.productId).filter(Boolean))];
    if (chosen && !ids.includes(chosen)) ids.push(chosen);
    ids.sort();
    select.replaceChildren(element('option', { value: '', text: 'All products' }), ...ids.map((id) => element('option', { value: id, text: id })));
    select.value = chosen;
  }

  function status(text, isError) {
    const line = $('status');
    line.textContent = text;
    line.classList.toggle('failed', Boolean(isError));
  }

  function failed(error) {
    if (error.status === 401) {
      signOut('The ledger no longer accepts this key (revoked?). Sign in again.');
      return;
    }
    if (error.code === 'projections_behind') return status('The audit trail is being rebuilt by this version of the ledger; try again in a moment. (' + error.message + ')', true);
    status('Could not load: ' + error.message, true);
  }

  // ---------- reconciliation ----------

  let reconciled = 0;

  /// The UTC instant a reporting day starts at in a time zone (DST included), as ISO 8601.
  function zoneOffset(ms, zone) {
    const parts = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit' }).formatToParts(new Date(ms));
    const get = (type) => Number(parts.find((p) => p.type === type).value);
    return Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second')) - ms;
  }

  function reportingDayStart(day, zone, plusDays) {
    const [y, m, d] = day.split('-').map(Number);
    const guess = Date.UTC(y, m - 1, d + (plusDays || 0));
    const first = guess - zoneOffset(guess, zone);
    return new Date(guess - zoneOffset(first, zone)).toISOString();
  }

  function reconcileStatus(text, isError) {
    const line = $('reconcile-status');
    line.textContent = text;
    line.classList.toggle('failed', Boolean(isError));
  }

  async function reconcile() {
    const params = { from: $('r-from').value, to: $('r-to').value, timeZone: $('r-zone').value.trim() || undefined };
    if (!params.from || !params.to) return reconcileStatus('Choose the first and the last reporting day.', true);
    if (params.from > params.to) return reconcileStatus('The first reporting day must not be after the last.', true);
    reconcileStatus('Reconciling…');
    try {
      const result = await getJSON('/v1/audit/reconciliation', params);
      drawReconciliation(result, params);
      const differing = result.rows.filter((row) => row.status === 'differs').length;
      const sandbox = result.sandboxUnits ? ` ${count(result.sandboxUnits, 'sandbox unit')} in the ledger, never in Apple's reports, not compared.` : '';
      reconcileStatus(`${count(result.rows.length, 'row')}, ${differing} differ${differing === 1 ? 's' : ''}, ${result.from} to ${result.to} (${result.timeZone}).${sandbox}`);
      document.body.dataset.reconciled = String(++reconciled);
    } catch (error) {
      if (error.status === 401) return failed(error);
      reconcileStatus('Could not reconcile: ' + error.message, true);
    }
  }

  function drawReconciliation(result, params) {
    const dayHead = element('tr', {}, ['Day', 'Report', 'Rows', 'Differ'].map((c) => element('th', { scope: 'col', text: c })));
    const dayRows = result.days.map((day) => element('tr', { 'data-day': day.day, class: day.differing ? 'differs' : '' }, [
      element('th', { scope: 'row', text: day.day }),
      element('td', { text: day.report ? day.report.slice(0, 12) + '…' : 'no report imported' }),
      element('td', { class: 'number', text: String(day.rows) }),
      element('td', { class: 'number', text: day.differing ? `${day.differing} ⚠` : '0' }),
    ]));
    $('reconcile-days').replaceChildren(element('div', { class: 'table-wrap' }, [element('table', {}, [
      element('caption', { class: 'hint', text: 'Days at a glance' }), element('thead', {}, [dayHead]), element('tbody', {}, dayRows)])]));

    const shown = result.rows.filter((row) => $('r-all').checked || row.status !== 'matched');
    const columns = ['Day', 'Product', 'Country', 'Currency', 'Price', 'Apple sold', 'Ledger sold', 'Apple refunded', 'Ledger refunded',
      'Apple proceeds', 'Ledger proceeds', 'Status', 'Why', 'Rows'];
    const head = element('tr', {}, columns.map((c) => element('th', { scope: 'col', text: c })));
    const zone = result.timeZone;
    const body = shown.map((row) => element('tr', { 'data-status': row.status, 'data-product': row.productId, 'data-country': row.country || '' }, [
      element('td', { text: row.day }), element('td', { text: row.productId }), element('td', { text: row.country || '(no country)' }),
      element('td', { text: row.currency || '' }), element('td', { class: 'number', text: row.price || '' }),
      element('td', { class: 'number', 'data-column': 'appleSold', text: String(row.apple.unitsSold) }),
      element('td', { class: 'number', 'data-column': 'ledgerSold', text: String(row.ledger.unitsSold) }),
      element('td', { class: 'number', 'data-column': 'appleRefunded', text: String(row.apple.unitsRefunded) }),
      element('td', { class: 'number', 'data-column': 'ledgerRefunded', text: String(row.ledger.unitsRefunded) }),
      element('td', { class: 'number', text: row.appleProceeds ? `${row.appleProceeds} ${row.proceedsCurrency || ''}` : '' }),
      element('td', { class: 'number', 'data-column': 'ledgerProceeds', text: row.proceedsSource ? `${row.ledgerProceeds ? row.ledgerProceeds + ' ' + (row.ledgerProceedsCurrency || '') : 'unknown'} (${row.proceedsSource})` : '' }),
      element('td', { 'data-column': 'status', text: row.status }),
      element('td', {}, [element('ul', {}, row.explanations.map((e) => element('li', { 'data-code': e.code, text: `${e.code}: ${e.message}` })))]),
      element('td', {}, row.transactions.length ? [element('button', { type: 'button', class: 'cell', text: count(row.transactions.length, 'transaction'),
        'aria-label': `The ledger's rows of ${row.productId} on ${row.day}`,
        onclick: () => openDrill({ title: `The ledger's rows of ${row.productId}, ${row.day} (${zone})`, route: 'events',
          note: `Behind this row: ${row.transactions.join(', ')}. The list shows every production row of the product that day.`,
          params: { productId: row.productId, environment: 'production', from: reportingDayStart(row.day, zone), to: reportingDayStart(row.day, zone, 1) } }) })] : []),
    ]));
    $('reconcile-rows').replaceChildren(
      shown.length ? element('div', { class: 'table-wrap' }, [element('table', { id: 'reconcile-table' }, [
        element('caption', { class: 'hint', text: $('r-all').checked ? 'Every row' : 'The rows that are not matched' }),
        element('thead', {}, [head]), element('tbody', {}, body)])]) : empty('Every row matches Apple\u2019s reports.'),
      element('button', { type: 'button', class: 'download', id: 'reconcile-csv', text: 'Download the reconciliation (CSV)',
        onclick: () => downloadCSV({ route: 'reconciliation', params }) }));
  }

  // ---------- drill-down ----------

  let drill = null;

  const ROUTES = {
    events: { path: '/v1/audit/events', field: 'events', columns: ['position', 'occurredAt', 'environment', 'event', 'userId', 'deviceId', 'productId', 'productType', 'quantity', 'price', 'currency', 'amount', 'proceeds', 'proceedsCurrency', 'proceedsSource', 'priceSource', 'transactionId', 'originalTransactionId', 'purchaseDate', 'expiresDate', 'revoked'] },
    reconciliation: { path: '/v1/audit/reconciliation' },
    adjustments: { path: '/v1/audit/adjustments' },
    restores: { path: '/v1/audit/restores', field: 'restores', columns: ['position', 'restoredAt', 'environment', 'userId', 'deviceId', 'productId', 'transactionId'] },
  };

  async function openDrill(spec) {
    drill = Object.assign({ cursors: [undefined], index: 0 }, spec);
    const route = ROUTES[spec.route];
    $('drill').hidden = false;
    $('drill-title').textContent = spec.title;
    $('drill-query').textContent = 'GET ' + route.path + decodeURIComponent(queryString(spec.params));
    $('drill-note').textContent = spec.note || '';
    await showDrillPage();
    $('drill-title').focus();
  }

  async function showDrillPage() {
    const route = ROUTES[drill.route];
    const current = drill;
    try {
      const page = await getJSON(route.path, Object.assign({}, drill.params, { limit: PAGE_SIZE, cursor: drill.cursors[drill.index] }));
      if (current !== drill) return;
      drill.cursors[drill.index + 1] = page.nextCursor || undefined;
      const rows = page[route.field];
      const columns = current.mark ? ['active', ...route.columns] : route.columns;
      const head = element('tr', {}, columns.map((c) => element('th', { scope: 'col', text: c })));
      const body = rows.map((row) => element('tr', { 'data-position': row.position },
        columns.map((c) => element('td', { 'data-column': c, text: c === 'active' ? (current.mark(row) ? 'active' : '') : formatCell(row[c]) }))));
      $('drill-table').replaceChildren(element('thead', {}, [head]), element('tbody', {}, body.length ? body : [element('tr', {}, [element('td', { colspan: columns.length, class: 'empty', text: 'No rows.' })])]));
      $('drill-page').textContent = `Page ${drill.index + 1}, rows ${drill.index * PAGE_SIZE + (rows.length ? 1 : 0)}–${drill.index * PAGE_SIZE + rows.length}${page.nextCursor ? '' : ' (last page)'}`;
      $('drill-previous').disabled = drill.index === 0;
      $('drill-next').disabled = !page.nextCursor;
    } catch (error) {
      failed(error);
    }
  }

  function formatCell(value) {
    if (value === null || value === undefined) return '';
    return String(value);
  }

  /// The CSV of a query, exactly as the API sends it (bytes unchanged), saved under the API's file name.
  async function downloadCSV(spec) {
    const route = ROUTES[spec.route];
    try {
      status('Preparing the CSV…');
      const response = await request(route.path, spec.params, 'text/csv');
      const blob = await response.blob();
      const disposition = response.headers.get('Content-Disposition') || '';
      const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || 'audit.csv';
      const url = URL.createObjectURL(blob);
      const link = element('a', { href: url, download: name, hidden: '' });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      status(`Downloaded ${name} (${blob.size} bytes): GET ${route.path}${decodeURIComponent(queryString(spec.params))} with Accept: text/csv.`);
    } catch (error) {
      failed(error);
    }
  }

  // ---------- signing in ----------

  async function signIn(key) {
    sessionStorage.setItem(KEY, key);
    $('sign-in-error').textContent = '';
    try {
      const me = await getJSON('/v1/key');
      if (!me.scopes.includes('finance')) {
        sessionStorage.removeItem(KEY);
        $('sign-in-error').textContent = `This key (${me.keyId}, app ${me.app}) has no finance scope; it has ${me.scopes.join(', ') || 'none'}. Ask an admin for one: ledger keys create --app ${me.app} --scope finance.`;
        return;
      }
      $('who').textContent = `App ${me.app} · key ${me.keyId}${me.name ? ' (' + me.name + ')' : ''}`;
      $('sign-in').hidden = true;
      $('dashboard').hidden = false;
      $('sign-out').hidden = false;
      await load();
    } catch (error) {
      sessionStorage.removeItem(KEY);
      $('sign-in-error').textContent = error.status === 401
        ? 'This key was refused: it is not a key of this ledger, or it was revoked. Check that you copied all of it (it starts with lk_).'
        : 'Could not sign in: ' + error.message;
    }
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    $('dashboard').hidden = true;
    $('sign-out').hidden = true;
    $('sign-in').hidden = false;
    $('who').textContent = '';
    for (const id of ['money', 'counts', 'subscriptions', 'nonrenewing', 'warnings-body', 'drill-table']) $(id).replaceChildren();
    $('drill').hidden = true;
    $('sign-in-error').textContent = message || '';
    $('key').value = '';
    $('key').focus();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('sign-in-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const key = $('key').value.trim();
      if (!key) { $('sign-in-error').textContent = 'Paste a finance API key first.'; return; }
      signIn(key);
    });
    $('filters').addEventListener('submit', (event) => { event.preventDefault(); load(); });
    $('reconcile-form').addEventListener('submit', (event) => { event.preventDefault(); reconcile(); });
    $('sign-out').addEventListener('click', () => signOut('Signed out.'));
    $('drill-close').addEventListener('click', () => { $('drill').hidden = true; });
    $('drill-next').addEventListener('click', () => { drill.index += 1; showDrillPage(); });
    $('drill-previous').addEventListener('click', () => { drill.index = Math.max(0, drill.index - 1); showDrillPage(); });
    $('drill-csv').addEventListener('click', () => downloadCSV(drill));
    const saved = sessionStorage.getItem(KEY);
    if (saved) signIn(saved);
    else $('key').focus();
  });
})();
