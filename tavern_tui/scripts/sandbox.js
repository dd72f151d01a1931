// The sandbox prelude (tavern_tui.scripts.templates): host hooks removed, then a small lodash
// subset (`_`) written for cards' use, then the evaluator every template runs in.
(function () {
  for (const name of ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', '__timer_manager',
                      'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'require', 'process', 'fetch']) {
    try { delete globalThis[name]; } catch (e) {}
    try { if (name in globalThis) globalThis[name] = undefined; } catch (e) {}
  }
})();
var __toPath = function (path) {
  if (Array.isArray(path)) return path.map(String);
  if (typeof path !== 'string') return [String(path)];
  const out = []; let cur = ''; let i = 0; let had = false;
  while (i < path.length) {
    const c = path[i];
    if (c === '.') { if (cur !== '' || !had) out.push(cur); cur = ''; had = false; i++; continue; }
    if (c === '[') {
      if (cur !== '') { out.push(cur); cur = ''; }
      const end = path.indexOf(']', i);
      if (end < 0) { cur += path.slice(i); break; }
      let inner = path.slice(i + 1, end);
      if (/^(["']).*\1$/.test(inner)) inner = inner.slice(1, -1);
      out.push(inner); had = true; i = end + 1; continue;
    }
    cur += c; had = false; i++;
  }
  if (cur !== '' || out.length === 0) out.push(cur);
  return out;
};
var _ = (function () {
  const isObj = (v) => v !== null && (typeof v === 'object' || typeof v === 'function');
  const get = (obj, path, dflt) => {
    let cur = obj;
    for (const key of __toPath(path)) { if (cur === null || cur === undefined) return dflt; cur = cur[key]; }
    return cur === undefined ? dflt : cur;
  };
  const has = (obj, path) => {
    let cur = obj;
    for (const key of __toPath(path)) {
      if (!isObj(cur) || !Object.prototype.hasOwnProperty.call(cur, key)) return false;
      cur = cur[key];
    }
    return true;
  };
  const set = (obj, path, value) => {
    if (!isObj(obj)) return obj;
    const keys = __toPath(path); let cur = obj;
    keys.forEach((key, i) => {
      if (i === keys.length - 1) { cur[key] = value; return; }
      if (!isObj(cur[key])) cur[key] = /^\d+$/.test(keys[i + 1]) ? [] : {};
      cur = cur[key];
    });
    return obj;
  };
  const unset = (obj, path) => {
    const keys = __toPath(path); const parent = keys.length > 1 ? get(obj, keys.slice(0, -1)) : obj;
    if (isObj(parent)) return delete parent[keys[keys.length - 1]];
    return true;
  };
  const cloneDeep = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  const isEqual = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const vals = (v) => (isObj(v) ? Object.values(v) : typeof v === 'string' ? v.split('') : []);
  const iter = (f) => (typeof f === 'function' ? f : typeof f === 'string' ? (x) => get(x, f) : (x) => x);
  const merge = (target, ...sources) => {
    for (const src of sources) {
      if (!isObj(src)) continue;
      for (const [k, v] of Object.entries(src)) {
        if (isObj(v) && !Array.isArray(v) && isObj(target[k])) merge(target[k], v); else target[k] = cloneDeep(v);
      }
    }
    return target;
  };
  return {
    get, has, set, unset, cloneDeep, clone: (v) => (Array.isArray(v) ? v.slice() : isObj(v) ? { ...v } : v),
    isEqual, merge, toPath: __toPath,
    isNil: (v) => v === null || v === undefined, isNull: (v) => v === null, isUndefined: (v) => v === undefined,
    isArray: Array.isArray, isObject: isObj, isString: (v) => typeof v === 'string',
    isNumber: (v) => typeof v === 'number', isBoolean: (v) => typeof v === 'boolean',
    isFunction: (v) => typeof v === 'function', isFinite: Number.isFinite, isInteger: Number.isInteger,
    isPlainObject: (v) => isObj(v) && !Array.isArray(v),
    isEmpty: (v) => v === null || v === undefined || (typeof v === 'string' || Array.isArray(v) ? v.length === 0
      : isObj(v) ? Object.keys(v).length === 0 : true),
    keys: (v) => (isObj(v) ? Object.keys(v) : []), values: vals, entries: (v) => (isObj(v) ? Object.entries(v) : []),
    toPairs: (v) => (isObj(v) ? Object.entries(v) : []), size: (v) => (isObj(v) ? vals(v).length : String(v ?? '').length),
    includes: (c, x) => (typeof c === 'string' ? c.includes(x) : vals(c).includes(x)),
    map: (c, f) => vals(c).map(iter(f)), filter: (c, f) => vals(c).filter(iter(f)), find: (c, f) => vals(c).find(iter(f)),
    forEach: (c, f) => { if (isObj(c)) for (const [k, v] of Object.entries(c)) if (f(v, k, c) === false) break; return c; },
    each: (c, f) => _.forEach(c, f),
    some: (c, f) => vals(c).some(iter(f)), every: (c, f) => vals(c).every(iter(f)),
    sum: (a) => vals(a).reduce((s, x) => s + x, 0), sumBy: (a, f) => vals(a).reduce((s, x) => s + iter(f)(x), 0),
    max: (a) => (vals(a).length ? Math.max(...vals(a)) : undefined), min: (a) => (vals(a).length ? Math.min(...vals(a)) : undefined),
    clamp: (n, lo, hi) => Math.min(Math.max(n, lo), hi), inRange: (n, a, b) => (b === undefined ? n >= 0 && n < a : n >= Math.min(a, b) && n < Math.max(a, b)),
    range: (a, b, s) => { if (b === undefined) { b = a; a = 0; } s = s || (b < a ? -1 : 1); const out = [];
      for (let i = a; s > 0 ? i < b : i > b; i += s) { out.push(i); if (out.length > 1e6) break; } return out; },
    round: (n, p) => { const f = Math.pow(10, p || 0); return Math.round(n * f) / f; }, floor: Math.floor, ceil: Math.ceil,
    toNumber: Number, toString: (v) => (v === null || v === undefined ? '' : String(v)), toInteger: (v) => Math.trunc(Number(v)) || 0,
    defaultTo: (v, d) => (v === null || v === undefined || Number.isNaN(v) ? d : v),
    first: (a) => vals(a)[0], head: (a) => vals(a)[0], last: (a) => { const v = vals(a); return v[v.length - 1]; },
    uniq: (a) => [...new Set(vals(a))], sortBy: (a, f) => vals(a).slice().sort((x, y) => (iter(f)(x) > iter(f)(y) ? 1 : iter(f)(x) < iter(f)(y) ? -1 : 0)),
    pick: (o, ...ks) => { const r = {}; for (const k of ks.flat()) if (has(o, k)) set(r, k, get(o, k)); return r; },
    omit: (o, ...ks) => { const r = cloneDeep(o) || {}; for (const k of ks.flat()) unset(r, k); return r; },
    startsWith: (s, x) => String(s).startsWith(x), endsWith: (s, x) => String(s).endsWith(x), trim: (s) => String(s ?? '').trim(),
    capitalize: (s) => { s = String(s ?? ''); return s.charAt(0).toUpperCase() + s.slice(1).toLowerCase(); },
    random: (a, b) => { if (b === undefined) { b = a; a = 0; } return a + Math.floor(Math.random() * (b - a + 1)); },
  };
})();

// @@EVAL@@
(function (__snapshotJson, __template) {
  const __snap = JSON.parse(__snapshotJson);
  const __writes = [];
  let __output = '';
  const __append = function (s) { if (s !== undefined && s !== null) __output += s; };
  const __scopes = ['message', 'local', 'global'];
  const variables = Object.assign({}, __snap.global || {}, __snap.local || {}, __snap.message || {});
  const getvar = function (key, options) {
    options = options || {};
    const scopes = options.scope ? [options.scope] : __scopes;
    for (const scope of scopes) {
      const store = __snap[scope] || {};
      if (_.has(store, key)) { const v = _.get(store, key); return options.index !== undefined ? _.get(v, options.index, options.defaults) : v; }
    }
    return options.defaults;
  };
  const setvar = function (key, value, index, scope) {
    let options = (index !== null && typeof index === 'object') ? index : { index: index, scope: scope };
    const where = options.scope || 'message';
    const path = __toPath(key);
    if (options.index !== undefined && options.index !== null) path.push(String(options.index));
    const store = (__snap[where] = __snap[where] || {});
    _.set(store, path, value);
    Object.assign(variables, { [path[0]]: store[path[0]] });
    __writes.push({ scope: where, name: path[0], value: store[path[0]] === undefined ? null : store[path[0]] });
    return value;
  };
  const print = function () { for (const a of arguments) __append(a); };
  (function () { eval(__template); })();
  return JSON.stringify({ out: __output, writes: __writes });
})
