// toYAML prints decoded JSON as YAML, the way kubectl get -o yaml reads:
// block style, two spaces, list items under their key, strings plain
// where YAML reads them back as the same string and double-quoted (JSON's
// escapes, which YAML's double-quoted style shares) where it would not.
// Multi-line strings are literal blocks. It only prints; the console never
// parses YAML (the API does).
"use strict";

const YAML_WORDS = /^(true|false|yes|no|on|off|y|n|null|~)$/i;
const YAML_NUMBER = /^[-+]?(\.?[0-9]|0x|0o|\.inf|\.nan)/i;

// plainOK reports whether s can stand unquoted and read back as itself.
function plainOK(s) {
  if (s === "" || s.trim() !== s || YAML_WORDS.test(s) || YAML_NUMBER.test(s)) return false;
  // Indicators that cannot start a plain scalar; "-", "?" and ":" can,
  // when a non-space follows (-c, ::1).
  if (/^[,\[\]{}#&*!|>'"%@`]/.test(s) || /^[-?:]( |$)/.test(s)) return false;
  if (/: |:$| #|[\x00-\x1f\x7f]/.test(s)) return false;
  return true;
}

function yamlString(s) {
  return plainOK(s) ? s : JSON.stringify(s);
}

function yamlKey(k) {
  return plainOK(k) ? k : JSON.stringify(k);
}

function isBlock(v) {
  return v !== null && typeof v === "object" && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
}

function yamlScalar(v) {
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return "[]";
  if (typeof v === "object") return "{}";
  if (typeof v === "string") return yamlString(v);
  return String(v);
}

// literal prints a multi-line string as a block under indent.
function literal(s, indent) {
  const chomp = s.endsWith("\n") ? "" : "-";
  const body = s.replace(/\n$/, "").split("\n").map(l => (l ? indent + l : "")).join("\n");
  return "|" + chomp + "\n" + body;
}

function multiline(v) {
  // A literal block cannot hold lines that start with spaces at its first
  // line, nor carriage returns: those stay quoted.
  return typeof v === "string" && v.includes("\n") && !/\r|^\s/.test(v);
}

function yamlLines(v, indent) {
  const out = [];
  if (Array.isArray(v)) {
    for (const item of v) {
      if (isBlock(item) && !Array.isArray(item)) {
        const inner = yamlLines(item, indent + "  ");
        out.push(indent + "- " + inner[0].slice(indent.length + 2), ...inner.slice(1));
      } else if (isBlock(item)) {
        out.push(indent + "-", ...yamlLines(item, indent + "  "));
      } else if (multiline(item)) {
        out.push(indent + "- " + literal(item, indent + "  "));
      } else {
        out.push(indent + "- " + yamlScalar(item));
      }
    }
    return out;
  }
  for (const [k, val] of Object.entries(v)) {
    const key = indent + yamlKey(k) + ":";
    if (isBlock(val)) {
      // Lists sit at their key's indentation, as kubectl prints them.
      out.push(key, ...yamlLines(val, Array.isArray(val) ? indent : indent + "  "));
    } else if (multiline(val)) {
      out.push(key + " " + literal(val, indent + "  "));
    } else {
      out.push(key + " " + yamlScalar(val));
    }
  }
  return out;
}

function toYAML(v) {
  if (!isBlock(v)) return (multiline(v) ? literal(v, "  ") : yamlScalar(v)) + "\n";
  return yamlLines(v, "").join("\n") + "\n";
}
