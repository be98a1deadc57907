// An event's payload for display, shared by the dashboard's job page and the portal's
// delivery page. The payload is untrusted: callers put it in textContent, never markup.

import { fmtBytes, fmtTime } from "./dom.js";

/** The most bytes of a payload either page asks for. */
export const BODY_BYTES = 64 * 1024;

/** Pretty JSON when the whole body is there and parses; else the text as stored; null once
 * retention purged it. `event` is a `JobEventBody` answer. */
export function payloadText(event, pretty) {
  if (event.body_purged_at !== null) return null;
  if (pretty && !event.truncated) {
    try {
      return JSON.stringify(JSON.parse(event.body), null, 2);
    } catch {
      // not JSON after all: show it as stored
    }
  }
  return event.body;
}

/** One line about the payload shown: its type and size, or when retention purged it. */
export function payloadNote(event) {
  if (event.body_purged_at !== null) {
    return `The body was purged by retention ${fmtTime(event.body_purged_at)}.`;
  }
  return `${event.type}, ${fmtBytes(event.size_bytes)}` +
    (event.truncated ? `; showing the first ${fmtBytes(BODY_BYTES)} as stored` : "") +
    (event.valid_utf8 ? "" : "; bytes that are not UTF-8 are shown as \uFFFD");
}
