// toYAML prints decoded JSON as YAML the way kubectl get -o yaml reads:
// block style, two spaces, list items at their key's indentation,
// multi-line strings as literal blocks. js-yaml (vendor/, MIT) does the
// printing; the console never parses YAML (the API does).
"use strict";

function toYAML(value) {
  return jsyaml.dump(value, { indent: 2, noArrayIndent: true, lineWidth: -1, noRefs: true });
}
