// The console's Devices page: boxes waiting for activation, connected, registered; add a device;
// in cluster mode, which member serves each device of the cluster;
// which person each device belongs to (its memory and conversation).
"use strict";
const SOURCE = {console: "set here", "gateway.yaml": "gateway.yaml", own: "own memory"};

function personEditor(device) {  // the person a device belongs to: "" = its own memory
  const box = document.createElement("span");
  const input = document.createElement("input");
  input.value = device.mapped ? device.person : ""; input.placeholder = "own memory"; input.maxLength = 64;
  input.setAttribute("list", "people-list"); input.setAttribute("aria-label", `person of ${device.device_id}`);
  const note = document.createElement("span");
  note.className = "muted"; note.textContent = ` ${device.mapped ? "" : device.person + ", "}${SOURCE[device.person_source] || ""}`;
  box.append(input, button("Set", () => write("devices/person", {device_id: device.device_id, person: input.value})), note);
  if (device.person_source === "console") {
    box.appendChild(button("As gateway.yaml", () => write("devices/person", {device_id: device.device_id, person: null})));
  }
  return box;
}

async function loadDevices() {
  const d = await api("GET", "devices");
  const people = await api("GET", "people");
  $("people-list").replaceChildren(...people.people.map((p) => { const o = document.createElement("option"); o.value = p; return o; }));
  const editing = document.activeElement && document.activeElement.tagName === "INPUT" ? document.activeElement.closest("table") : null;
  fill("pending", "pending-none", d.pending, (tr, p) => {
    cell(tr, p.code, "code"); cell(tr, p.device_id); cell(tr, p.details);
    cell(tr, p.approved ? "approved, waiting for the box" : `expires in ${p.expires_in} s`);
    const actions = cell(tr, "");
    if (!p.approved) {
      actions.appendChild(button("Approve", () => write("devices/approve", {code: p.code}), "primary"));
      actions.appendChild(button("Reject", () => write("devices/reject", {device_id: p.device_id}), "danger"));
    }
  });
  if (editing && editing.id !== "pending") return;  // never overwrite what is being typed
  fill("connected", "connected-none", d.connected, (tr, c) => {
    cell(tr, c.device_id); cell(tr, c.link); cell(tr, c.address);
    cell(tr, c.audio_in ? `${c.audio_in} / ${c.audio_out}` : ""); cell(tr, c.firmware); cell(tr, c.since ? when(c.since) : "");
    cell(tr, c.can_speak ? "yes" : "no"); cell(tr, c.registered ? c.person : personEditor(c));
  });
  fill("registered", "registered-none", d.registered, (tr, r) => {
    cell(tr, r.device_id + (r.connected ? " (connected)" : ""));
    const name = document.createElement("input");
    name.value = r.name; name.maxLength = 100; name.setAttribute("aria-label", `name of ${r.device_id}`);
    const nameCell = cell(tr, name);
    nameCell.appendChild(button("Rename", () => write("devices/rename", {device_id: r.device_id, name: name.value})));
    cell(tr, when(r.last_seen));
    cell(tr, personEditor(r));
    cell(tr, button("Remove", () => { if (confirm(`Remove ${r.device_id}? It can no longer connect.`)) write("devices/remove", {device_id: r.device_id}); }, "danger"));
  });
  $("cluster").classList.toggle("hidden", !d.cluster);  // cluster mode only: which member serves each device
  if (d.cluster) {
    $("cluster-member").textContent = `this gateway is member ${d.cluster.member}`;
    fill("cluster-devices", "cluster-none", d.cluster.devices, (tr, c) => {
      cell(tr, c.device_id); cell(tr, c.online ? "online" : "offline");
      cell(tr, c.gateway ? c.gateway + (c.gateway === d.cluster.member ? " (this gateway)" : "") : "nobody now", "served-by");
      cell(tr, c.since ? when(c.since) : "");
    });
  }
}

$("add").addEventListener("submit", (event) => {
  event.preventDefault();
  $("add-error").textContent = "";
  api("POST", "devices/add", {device_id: $("add-id").value, name: $("add-name").value}).then((r) => {
    $("cred-id").textContent = r.device_id;
    $("cred-firmware").textContent = Object.entries(r.firmware).map(([k, v]) => `#define ${k.padEnd(18)} "${v}"`).join("\n");
    $("credentials").classList.remove("hidden");
    $("add-id").value = ""; $("add-name").value = "";
    return refresh();
  }).catch((e) => { $("add-error").textContent = e.message; });
});
register("devices", loadDevices);
