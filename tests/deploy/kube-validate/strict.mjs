// strict.mjs: the fields each Kubernetes type has, read from the type
// declarations kubernetes-models ships (generated from the same OpenAPI
// document as its validators), so that validate.mjs refuses a field the
// API does not have: a misspelt "hostPid: true" passes a schema without
// additionalProperties: false, and the API server would drop it silently
// (kubectl warns, and --validate=strict refuses it).
import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";

const cache = new Map();

// The path of a module's .d.ts, from the file importing it.
function dtsOf(spec, from) {
  if (spec.startsWith(".")) return resolve(dirname(from), spec.replace(/\.js$/, ".d.ts"));
  const parts = spec.split("/");
  const pkg = spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
  const rest = parts.slice(pkg.split("/").length).join("/");
  // node's lookup: node_modules/PKG in the importing file's folder or above
  for (let d = dirname(from); ; d = dirname(d)) {
    const root = resolve(d, "node_modules", pkg);
    if (existsSync(root)) return resolve(root, `${rest}.d.ts`);
    if (d === dirname(d)) return null;
  }
}

// The body of the first interface in text, braces matched.
function firstInterface(text) {
  const m = /export interface \w+(?: extends [\w, ]+)? \{/.exec(text);
  if (!m) return null;
  let depth = 1, i = m.index + m[0].length;
  const start = i;
  for (; i < text.length && depth > 0; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}") depth--;
  }
  return text.slice(start, i - 1);
}

// { fields: Map(name -> type text), imports: Map(ident -> file) } of a .d.ts.
export function typeOf(file) {
  if (file === null) return null;
  if (cache.has(file)) return cache.get(file);
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    cache.set(file, null);
    return null;
  }
  const imports = new Map();
  for (const m of text.matchAll(/import \{([^}]*)\} from "([^"]+)"/g))
    for (const id of m[1].split(",").map((s) => s.trim()).filter(Boolean))
      imports.set(id, dtsOf(m[2], file));
  const body = firstInterface(text.replace(/\/\*[\s\S]*?\*\//g, ""));
  let t = null;
  if (body !== null) {
    const fields = new Map();
    let depth = 0, cur = "";
    for (const ch of body) {
      if (ch === "{" || ch === "<") depth++;
      if (ch === "}" || ch === ">") depth--;
      if (ch === ";" && depth === 0) {
        const m = /^\s*"([^"]+)"\??:\s*([\s\S]*)$/.exec(cur);
        if (m) fields.set(m[1], m[2].trim());
        cur = "";
      } else cur += ch;
    }
    t = { fields, imports, file };
  }
  cache.set(file, t);
  return t;
}

// The unknown fields of value (paths), walking the type given as text.
function walkText(value, typeText, owner, path, out) {
  let m;
  if ((m = /^Array<([\s\S]+)>$/.exec(typeText))) {
    if (Array.isArray(value)) value.forEach((v, i) => walkText(v, m[1].trim(), owner, `${path}/${i}`, out));
    return;
  }
  if ((m = /^\{\s*\[key: string\]:\s*([\s\S]+?);?\s*\}$/.exec(typeText))) {
    if (value && typeof value === "object")
      for (const [k, v] of Object.entries(value)) walkText(v, m[1].trim(), owner, `${path}/${k}`, out);
    return;
  }
  if (/^\w+$/.test(typeText) && owner.imports.has(typeText)) {
    const t = typeOf(owner.imports.get(typeText));
    if (t) walk(value, t, path, out);
  }
}

// Pushes onto out the path of every field of value its type does not have.
export function walk(value, t, path, out) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value)) {
    if (!t.fields.has(k)) {
      out.push(`${path}/${k}`);
      continue;
    }
    walkText(v, t.fields.get(k), t, `${path}/${k}`, out);
  }
}

// The type of a model module (e.g. kubernetes-models/apps/v1/DaemonSet).
export function modelType(spec) {
  return typeOf(dtsOf(spec, new URL(import.meta.url).pathname));
}
