// `parallax-gui --screenshot` on known traces, checked by pixel properties: lanes present,
// slice colours where slices are, nothing blank; and the scripted error contract (exit 2 naming
// the file).
#include <QImage>
#include <QProcess>
#include <QtTest>
#include <set>

#include "gui/core/palette.h"
#include "gui/views/scatter_view.h"
#include "gui_test_data.h"
#include "traces/chrome_reader.h"

using namespace parallax;
using namespace parallax::gui;

namespace {

struct Shot {
  int exit_code = -1;
  QString err;
  QImage image;
};

Shot Screenshot(const QString& name, const QStringList& args) {
  const QString out = test::DataDir() + "/" + name + ".png";
  QFile::remove(out);
  QProcess p;
  p.start(PARALLAX_GUI, QStringList{"--screenshot", out, "--size", "1200x700"} + args);
  p.waitForFinished(120000);
  Shot s;
  s.exit_code = p.exitCode();
  s.err = QString::fromUtf8(p.readAllStandardError());
  s.image = QImage(out);
  return s;
}

int CountColor(const QImage& img, QRgb c) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x) n += (line[x] | 0xff000000u) == (c | 0xff000000u) ? 1 : 0;
  }
  return n;
}

//! Rows whose pixels across the plot are the lane-header colour.
int LaneHeaderRows(const QImage& img) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    n += img.pixel(img.width() - 40, y) == qRgb(226, 230, 238) &&
         img.pixel(200, y) == qRgb(226, 230, 238);
  return n;
}

std::set<QRgb> Colors(const QImage& img) {
  std::set<QRgb> s;
  for (int y = 0; y < img.height(); y += 2) {
    for (int x = 0; x < img.width(); x += 2) s.insert(img.pixel(x, y));
  }
  return s;
}

}  // namespace

class TstGuiScreenshot : public QObject {
  Q_OBJECT
 private slots:
  void timelineOfSimulatedTrace() {
    const QString trace = test::SimulatedTrace();
    // 2 ms from the start: ops are wide enough to be drawn one by one.
    Shot s = Screenshot("timeline", {"--range", "0:300000", trace});
    QCOMPARE(s.exit_code, 0);
    QVERIFY(!s.image.isNull());
    QVERIFY(s.image.width() >= 1200 && s.image.height() >= 700);
    // Two ranks: two lane headers of 18 px each.
    QCOMPARE(LaneHeaderRows(s.image), 2 * 18);
    // The colours of the ops the trace holds appear where slices are drawn.
    auto t = traces::ReadChromeTrace(trace.toStdString());
    QVERIFY(t);
    int names_seen = 0;
    for (const char* n :
         {"qkv", "attn_core", "attn_out", "fc1", "fc2", "tp_allreduce", "act", "attn_norm"}) {
      names_seen += CountColor(s.image, ColorOfName(n)) > 20 ? 1 : 0;
    }
    QVERIFY2(names_seen >= 4, qPrintable(QString::number(names_seen)));
    QVERIFY(Colors(s.image).size() > 30);  // not blank
  }

  void timelineOfKinetoTrace() {
    Shot s = Screenshot("kineto", {test::KinetoTrace()});
    QCOMPARE(s.exit_code, 0);
    QVERIFY(LaneHeaderRows(s.image) >= 18);
    QVERIFY(CountColor(s.image, qRgb(250, 250, 252)) < s.image.width() * s.image.height() * 9 / 10);
    QVERIFY(Colors(s.image).size() > 30);
  }

  void compareView() {
    const QString meas = test::MeasuredTrace();
    if (meas.isEmpty()) QSKIP("no MPI: parallax run cannot make a measured trace");
    Shot s = Screenshot("compare", {"--compare", test::SimulatedTrace(), meas});
    QCOMPARE(s.exit_code, 0);
    QCOMPARE(LaneHeaderRows(s.image), 4 * 18);  // rank 0/1, predicted/measured
    // Error colours: saturated blue or red fills (ErrorColor at |err| >= full scale).
    const int blue = CountColor(s.image, ErrorColor(-1.0)),
              red = CountColor(s.image, ErrorColor(1.0));
    QVERIFY2(blue + red > 200, qPrintable(QString("%1 %2").arg(blue).arg(red)));
  }

  void plansView() {
    Shot s = Screenshot("plans", {"--view", "plans", test::CandidatesFile()});
    QCOMPARE(s.exit_code, 0);
    // The memory limit (dashed red) and points in the category colours (blended with alpha).
    QVERIFY(CountColor(s.image, qRgb(200, 30, 30)) > 50);
    int coloured = 0;
    for (QRgb c : Colors(s.image)) {
      const int r = qRed(c), g = qGreen(c), b = qBlue(c);
      coloured += (std::max({r, g, b}) - std::min({r, g, b}) > 60) ? 1 : 0;
    }
    QVERIFY(coloured > 20);
  }

  void statsView() {
    Shot s = Screenshot("stats", {"--view", "stats", test::KinetoTrace()});
    QCOMPARE(s.exit_code, 0);
    QVERIFY(CountColor(s.image, qRgb(86, 140, 214)) > 1000);  // compute bar
    QVERIFY(CountColor(s.image, qRgb(235, 120, 70)) > 100);   // exposed communication
  }

  void badFileExitsTwoNamingIt_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::newRow("not json") << QByteArray("garbage");
    QTest::newRow("truncated") << QByteArray("{\"traceEvents\":[{\"ph\":\"X\",");
  }
  void badFileExitsTwoNamingIt() {
    QFETCH(QByteArray, content);
    const QString bad = test::DataDir() + "/broken.json";
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(content);
    f.close();
    Shot s = Screenshot("bad", {bad});
    QCOMPARE(s.exit_code, 2);
    QVERIFY2(s.err.contains(bad), qPrintable(s.err));
    QProcess p;
    p.start(PARALLAX_GUI, {"--benchmark", bad});
    p.waitForFinished(60000);
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains(bad));
  }

  void benchmarkPrintsOneJsonObject() {
    QProcess p;
    p.start(PARALLAX_GUI, {"--benchmark", test::SimulatedTrace()});
    p.waitForFinished(120000);
    QCOMPARE(p.exitCode(), 0);
    const QJsonDocument j = QJsonDocument::fromJson(p.readAllStandardOutput());
    QVERIFY(j.isObject());
    for (const char* k : {"slices", "load_s", "first_frame_ms", "frame_ms_p50", "frame_ms_p99",
                          "bytes_per_slice"}) {
      QVERIFY2(j.object().contains(k), k);
    }
    auto t = traces::ReadChromeTrace(test::SimulatedTrace().toStdString());
    QCOMPARE(j.object()["slices"].toInteger(), static_cast<qint64>(t->slices().size()));
  }
};

QTEST_GUILESS_MAIN(TstGuiScreenshot)
#include "tst_gui_screenshot.moc"
