#include "traces/event_scan.h"

namespace parallax::traces {
namespace {

//! Reads `"key":` for the args keys our writer uses (ArgKey), written plainly, into a.key and
//! a.known without decoding the key string. Returns false (nothing consumed) otherwise.
bool FastArgKey(JsonScanner& scanner, RawArg* a) {
  const char* p = scanner.pos();
  if (scanner.end() - p < 2 || *p != '"') return false;
  const auto take = [&](ArgKey k, size_t n) {
    a->key = {p + 1, n};
    a->known = k;
    return true;
  };
  switch (p[1]) {
    case 's':
      if (scanner.TryLiteral("\"step\":")) return take(ArgKey::kStep, 4);
      if (scanner.TryLiteral("\"stage\":")) return take(ArgKey::kStage, 5);
      return false;
    case 'r':
      return scanner.TryLiteral("\"rank\":") && take(ArgKey::kRank, 4);
    case 'm':
      return scanner.TryLiteral("\"mb\":") && take(ArgKey::kMb, 2);
    case 'l':
      return scanner.TryLiteral("\"layer\":") && take(ArgKey::kLayer, 5);
    case 'o':
      return scanner.TryLiteral("\"op\":") && take(ArgKey::kOp, 2);
    case 'p':
      return scanner.TryLiteral("\"phase\":") && take(ArgKey::kPhase, 5);
    case 'f':
      return scanner.TryLiteral("\"flops\":") && take(ArgKey::kFlops, 5);
    case 'b':
      return scanner.TryLiteral("\"bytes\":") && take(ArgKey::kBytes, 5);
    case 'g':
      return scanner.TryLiteral("\"group_size\":") && take(ArgKey::kGroupSize, 10);
    case 'c':
      return scanner.TryLiteral("\"collective\":") && take(ArgKey::kCollective, 10);
    default:
      return false;
  }
}

void ScanArgs(JsonScanner& scanner, RawEvent& ev, std::vector<RawArg>& store) {
  ev.has_args = true;
  // A repeated "args" key replaces the earlier one (its entries stay unused in the store).
  ev.args_begin = static_cast<uint32_t>(store.size());
  ev.args_count = 0;
  scanner.Expect('{');
  if (scanner.Consume('}')) return;
  do {
    RawArg a;
    scanner.SkipWs();
    if (!FastArgKey(scanner, &a)) {
      a.key = scanner.String();
      scanner.Expect(':');
    }
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
