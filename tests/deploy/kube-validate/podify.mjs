// podify.mjs DAEMONSET CONFIGMAP PREFIX IMAGE OUT: writes OUT.pod.yaml and
// OUT.configmap.yaml, the DaemonSet's pod
// template as a Pod (plus its ConfigMap) for `podman kube play`, as a node
// would run it: every hostPath moved under PREFIX (a test's own folder),
// the image replaced by IMAGE, and the configuration's ports set to 0 (the
// kernel picks) so a host's own listeners do not collide. Everything else
// (hostPID, hostNetwork, the init container, capabilities, read-only root)
// is the template's own. The Pod is named $POD_NAME (gprofd-node).
import { readFileSync, writeFileSync } from "node:fs";
import { parse, parseAllDocuments, stringify } from "yaml";

const [dsFile, cmFile, prefix, image, out] = process.argv.slice(2);
const ds = parse(readFileSync(dsFile, "utf8"));
const cm = parseAllDocuments(readFileSync(cmFile, "utf8"))[0].toJS();
const spec = structuredClone(ds.spec.template.spec);
for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
  c.image = image;
  delete c.ports; // hostNetwork: the port is the node's, picked in the configuration
  delete c.livenessProbe;
}
for (const v of spec.volumes) if (v.hostPath) v.hostPath.path = prefix + v.hostPath.path;
// fields a single host has no use for
delete spec.priorityClassName;
delete spec.serviceAccountName;
cm.data["gprofd.yaml"] = cm.data["gprofd.yaml"]
  .replace(/^metrics: .*$/m, "metrics: 127.0.0.1:0") + "tcp: 127.0.0.1:0\n";
const pod = { apiVersion: "v1", kind: "Pod",
  metadata: { name: process.env.POD_NAME ?? "gprofd-node", labels: ds.spec.template.metadata.labels,
    // podman's "once" init containers are removed as they exit, which
    // podman 4.3 races ("cannot remove container ... as it is running");
    // "always" runs them at each start of the pod, as Kubernetes does
    annotations: { "io.podman.annotations.init.container.type": "always" } }, spec };
writeFileSync(`${out}.configmap.yaml`, stringify(cm));
writeFileSync(`${out}.pod.yaml`, stringify(pod));
