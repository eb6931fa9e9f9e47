#pragma once
// ScanEvent: one traceEvents entry from JSON text into a RawEvent (internal to the Chrome
// reader). Shared by the streaming reader and the parallel chunk scanner, so both accept and
// reject exactly the same text.

#include <vector>

#include "traces/event_builder.h"
#include "traces/json_scanner.h"

namespace parallax::traces {

//! Scans the object at the scanner's position into `ev` (cleared first). Top-level args are
//! appended to `arg_store`; ev.args_begin/args_count index them (bind with RawEvent::BindArgs).
//! Throws ScanNeedMore / ScanError like the scanner.
void ScanEvent(JsonScanner& scanner, RawEvent& ev, std::vector<RawArg>& arg_store);

}  // namespace parallax::traces
