#include "traces/event_scan.h"

namespace parallax::traces {
namespace {

void ScanArgs(JsonScanner& scanner, RawEvent& ev, std::vector<RawArg>& store) {
  ev.has_args = true;
  // A repeated "args" key replaces the earlier one (its entries stay unused in the store).
  ev.args_begin = static_cast<uint32_t>(store.size());
  ev.args_count = 0;
  scanner.Expect('{');
  if (scanner.Consume('}')) return;
  do {
    RawArg a;
    a.key = scanner.String();
    scanner.Expect(':');
    a.value = scanner.Value(2);
    store.push_back(a);
    ++ev.args_count;
  } while (scanner.Consume(','));
  scanner.Expect('}');
}

}  // namespace

void ScanEvent(JsonScanner& scanner, RawEvent& ev, std::vector<RawArg>& arg_store) {
  ev.Clear();
  scanner.Expect('{');
  if (scanner.Consume('}')) return;
  do {
    const std::string_view key = scanner.String();
    scanner.Expect(':');
    RawValue* slot = nullptr;
    switch (key.size()) {
      case 1:
        if (key[0] == 's') slot = &ev.scope;
        break;
      case 2:
        if (key == "ph") slot = &ev.ph;
        else if (key == "ts") slot = &ev.ts;
        else if (key == "id") slot = &ev.id;
        else if (key == "bp") slot = &ev.bp;
        break;
      case 3:
        if (key == "pid") slot = &ev.pid;
        else if (key == "tid") slot = &ev.tid;
        else if (key == "cat") slot = &ev.cat;
        else if (key == "dur") slot = &ev.dur;
        break;
      case 4:
        if (key == "name") {
          slot = &ev.name;
        } else if (key == "args" && scanner.Peek() == '{') {
          ScanArgs(scanner, ev, arg_store);
          continue;
        }
        break;
      default:
        break;
    }
    if (slot != nullptr) {
      *slot = scanner.Value(1);
    } else {
      scanner.Skip(1);
    }
  } while (scanner.Consume(','));
  scanner.Expect('}');
}

}  // namespace parallax::traces
