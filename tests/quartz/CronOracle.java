/*
 * The reference side of the cron differential test: Quartz 2.3.2 itself.
 *
 * Reads lines from stdin and answers each with one line on stdout:
 *
 *   EXPR<TAB>ZONE<TAB>FROM_EPOCH_MS<TAB>COUNT
 *       -> the next COUNT fire times (epoch ms, space separated; fewer when
 *          the schedule ends), NONE when there is none, INVALID when Quartz
 *          rejects EXPR, ERROR <exception> when getTimeAfter throws, TIMEOUT
 *          when it has not returned within the time limit.
 *   #WALL<TAB>ZONE<TAB>Y<TAB>M<TAB>D<TAB>H<TAB>MI<TAB>S
 *       -> the instant java.util.GregorianCalendar gives that wall time.
 *   #OFFSETS<TAB>ZONE<TAB>FROM_S<TAB>STEP_S<TAB>N
 *       -> an FNV-1a hash of the zone's offsets (seconds) at FROM_S,
 *          FROM_S + STEP_S, ... (N instants).
 *
 * An empty ZONE is the JVM's default zone. Build and run:
 *   javac -cp quartz2.jar CronOracle.java
 *   java -cp quartz2.jar:slf4j-api.jar:. CronOracle < input
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Date;
import java.util.GregorianCalendar;
import java.util.TimeZone;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.quartz.CronExpression;

public final class CronOracle {
    private static final long TIME_LIMIT_MS = 1000;

    private static ExecutorService newPool() {
        return Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "oracle");
            t.setDaemon(true);
            return t;
        });
    }

    private static String[] splitRight(String line, int fields) {
        String[] out = new String[fields + 1];
        String rest = line;
        for (int k = fields; k >= 1; k--) {
            int tab = rest.lastIndexOf('\t');
            if (tab < 0) {
                return null;
            }
            out[k] = rest.substring(tab + 1);
            rest = rest.substring(0, tab);
        }
        out[0] = rest;
        return out;
    }

    private static TimeZone zone(String name) {
        return name.isEmpty() ? TimeZone.getDefault() : TimeZone.getTimeZone(name);
    }

    private static String cron(String expr, String zoneName, long from, int count) {
        CronExpression ce;
        try {
            ce = new CronExpression(expr);
        } catch (Throwable e) {
            return "INVALID";
        }
        ce.setTimeZone(zone(zoneName));
        StringBuilder sb = new StringBuilder();
        Date d = new Date(from);
        int got = 0;
        try {
            for (; got < count; got++) {
                d = ce.getTimeAfter(d);
                if (d == null) {
                    break;
                }
                if (got > 0) {
                    sb.append(' ');
                }
                sb.append(d.getTime());
            }
        } catch (Throwable e) {
            return "ERROR " + e.getClass().getName();
        }
        if (got == 0 && count > 0) {
            return "NONE";
        }
        return sb.toString();
    }

    private static String wall(String[] f) {
        GregorianCalendar c = new GregorianCalendar(zone(f[1]));
        c.clear();
        c.set(Integer.parseInt(f[2]), Integer.parseInt(f[3]) - 1, Integer.parseInt(f[4]),
              Integer.parseInt(f[5]), Integer.parseInt(f[6]), Integer.parseInt(f[7]));
        return Long.toString(c.getTimeInMillis());
    }

    private static String offsets(String[] f) {
        TimeZone tz = zone(f[1]);
        long from = Long.parseLong(f[2]);
        long step = Long.parseLong(f[3]);
        long n = Long.parseLong(f[4]);
        long h = 0xcbf29ce484222325L;
        for (long i = 0; i < n; i++) {
            int off = tz.getOffset((from + i * step) * 1000L) / 1000;
            for (int b = 0; b < 4; b++) {
                h ^= (off >>> (8 * b)) & 0xff;
                h *= 0x100000001b3L;
            }
        }
        return Long.toUnsignedString(h);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(System.out, false);
        ExecutorService pool = newPool();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.startsWith("#WALL\t")) {
                out.println(wall(line.split("\t", -1)));
                continue;
            }
            if (line.startsWith("#OFFSETS\t")) {
                out.println(offsets(line.split("\t", -1)));
                continue;
            }
            String[] f = splitRight(line, 3);
            if (f == null) {
                out.println("INVALID");
                continue;
            }
            final String expr = f[0];
            final String zoneName = f[1];
            final long from;
            final int count;
            try {
                from = Long.parseLong(f[2]);
                count = Integer.parseInt(f[3]);
            } catch (NumberFormatException e) {
                out.println("INVALID");
                continue;
            }
            Future<String> r = pool.submit(() -> cron(expr, zoneName, from, count));
            try {
                out.println(r.get(TIME_LIMIT_MS, TimeUnit.MILLISECONDS));
            } catch (TimeoutException e) {
                out.println("TIMEOUT");
                r.cancel(true);
                pool.shutdownNow();
                pool = newPool(); /* the stuck thread is a daemon; leave it */
            }
        }
        out.flush();
        System.exit(0);
    }
}
