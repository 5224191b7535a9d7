// validate.mjs FILE...: checks every document of each Kubernetes manifest
// against the API schema that kubernetes-models bundles (its validators are
// generated from the Kubernetes OpenAPI document, and the ServiceMonitor's
// from the prometheus-operator CRD): types, required fields, enums and
// formats, and no field the type does not have (strict.mjs). Nothing is
// downloaded. Prints one line per document, "FILE:N
// KIND NAME: ok" or the errors, and exits 1 when any document is invalid
// or of a kind it has no schema for.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { modelType, walk } from "./strict.mjs";

// apiVersion -> the module that holds its kinds
const groups = {
  "v1": "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "rbac.authorization.k8s.io/v1": "kubernetes-models/rbac.authorization.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

let bad = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  let n = 0;
  for (const doc of docs) {
    n++;
    const where = `${file}:${n}`;
    if (doc.errors.length) {
      console.log(`${where}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      bad++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const mod = groups[obj.apiVersion];
    let Model;
    try {
      Model = mod && (await import(`${mod}/${obj.kind}`))[obj.kind];
    } catch {
      Model = undefined;
    }
    if (!Model) {
      console.log(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
      bad++;
      continue;
    }
    try {
      new Model(obj).validate();
      const t = modelType(`${mod}/${obj.kind}`);
      if (!t || t.fields.size === 0) throw new Error(`no field list for ${obj.kind}`);
      const unknown = [];
      walk(obj, t, "", unknown);
      if (unknown.length) throw new Error(`fields the API does not have: ${unknown.join(", ")}`);
      console.log(`${where} ${obj.kind} ${obj.metadata?.name}: ok`);
    } catch (e) {
      console.log(`${where} ${obj.kind} ${obj.metadata?.name}: ${e.message}`);
      bad++;
    }
  }
}
process.exit(bad ? 1 : 0);
