// A params parser for the common case, a flat object of plain fields, so a handler checks its
// params without a schema library (any `(raw) => P` that throws on a misfit does as well,
// e.g. a zod schema's `parse`).

const ARTICLE = { array: "an", object: "an" };

/** `shape({region: "string", limit: "number?"})`: a parser taking objects with those fields. */
export function shape(fields) {
  return (raw) => {
    if (kind(raw) !== "object") throw new TypeError(`params must be an object, not ${kind(raw)}`);
    for (const [name, type] of Object.entries(fields)) {
      const optional = type.endsWith("?");
      const want = optional ? type.slice(0, -1) : type;
      const value = raw[name];
      if (value === undefined || value === null) {
        if (optional) continue;
        throw new TypeError(`${name} is missing (${ARTICLE[want] ?? "a"} ${want})`);
      }
      if (kind(value) !== want)
        throw new TypeError(`${name} must be ${ARTICLE[want] ?? "a"} ${want}, not ${kind(value)}`);
    }
    return raw;
  };
}

function kind(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}
