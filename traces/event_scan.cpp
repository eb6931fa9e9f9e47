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

namespace {

//! The slot of a key our writer and Kineto use, read without decoding the key string when it
//! is written plainly ("ph": ...). Returns false (nothing consumed) otherwise.
bool FastKey(JsonScanner& scanner, RawEvent& ev, RawValue** slot, bool* args) {
  const char* p = scanner.pos();
  if (scanner.end() - p < 8 || *p != '"') return false;
  switch (p[1]) {
    case 'p':
      if (scanner.TryLiteral("\"ph\":")) return *slot = &ev.ph, true;
      if (scanner.TryLiteral("\"pid\":")) return *slot = &ev.pid, true;
      return false;
    case 't':
      if (scanner.TryLiteral("\"ts\":")) return *slot = &ev.ts, true;
      if (scanner.TryLiteral("\"tid\":")) return *slot = &ev.tid, true;
      return false;
    case 'd':
      return scanner.TryLiteral("\"dur\":") && (*slot = &ev.dur, true);
    case 'n':
      return scanner.TryLiteral("\"name\":") && (*slot = &ev.name, true);
    case 'c':
      return scanner.TryLiteral("\"cat\":") && (*slot = &ev.cat, true);
    case 'i':
      return scanner.TryLiteral("\"id\":") && (*slot = &ev.id, true);
    case 'a':
      return scanner.TryLiteral("\"args\":") && (*args = true, true);
    default:
      return false;
  }
}

RawValue* SlotOf(RawEvent& ev, std::string_view key) {
  switch (key.size()) {
    case 1:
      if (key[0] == 's') return &ev.scope;
      break;
    case 2:
      if (key == "ph") return &ev.ph;
      if (key == "ts") return &ev.ts;
      if (key == "id") return &ev.id;
      if (key == "bp") return &ev.bp;
      break;
    case 3:
      if (key == "pid") return &ev.pid;
      if (key == "tid") return &ev.tid;
      if (key == "cat") return &ev.cat;
      if (key == "dur") return &ev.dur;
      break;
    case 4:
      if (key == "name") return &ev.name;
      break;
    default:
      break;
  }
  return nullptr;
}

}  // namespace

void ScanEvent(JsonScanner& scanner, RawEvent& ev, std::vector<RawArg>& arg_store) {
  ev.Clear();
  scanner.Expect('{');
  if (scanner.Consume('}')) return;
  do {
    scanner.SkipWs();
    RawValue* slot = nullptr;
    bool args = false;
    if (!FastKey(scanner, ev, &slot, &args)) {
      const std::string_view key = scanner.String();
      scanner.Expect(':');
      slot = SlotOf(ev, key);
      args = key == "args";
    }
    if (args) {
      if (scanner.Peek() == '{') {
        ScanArgs(scanner, ev, arg_store);
        continue;
      }
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
