// lockcheck reference client: Apache Curator's InterProcessMutex (Debian libcurator-recipes-java),
// the very recipe lockcheck's zk-sequential renders, with the session timeout lockcheck gives.
// A single-file source program (java 11+ compiles it at start); the protocol is
// docs/check-your-lock.md's, version 1. Run (the classpath is clients/curator-classpath):
//   lockcheck real --algorithm zk-sequential --faults pause \
//     --client "java -cp $(cat clients/curator-classpath) clients/CuratorLock.java"

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class CuratorLock {
    static final BufferedReader IN = new BufferedReader(new InputStreamReader(System.in));

    static void say(String fields) {
        System.out.println("{\"v\":1," + fields + "}");
        System.out.flush();
    }

    static String hear() throws Exception {
        String line = IN.readLine();
        if (line == null) { // lockcheck is gone
            System.exit(0);
        }
        return line;
    }

    /** A string field of lockcheck's line (its lines are flat objects of plain values). */
    static String field(String line, String name) {
        Matcher m = Pattern.compile("\"" + name + "\":\"?([^,\"}]*)").matcher(line);
        return m.find() ? m.group(1) : "";
    }

    static String quoted(Throwable e) {
        String text = e.getClass().getSimpleName() + ": " + e.getMessage();
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    /** Asks lockcheck to touch the resource; true when it accepted the access. */
    static boolean access(String phase) throws Exception {
        say("\"op\":\"access\",\"phase\":\"" + phase + "\"");
        return field(hear(), "accepted").equals("true");
    }

    public static void main(String[] args) throws Exception {
        int ttl = Integer.parseInt(System.getenv("LOCKCHECK_TTL_MS"));
        CuratorFramework zk = CuratorFrameworkFactory.builder()
                .connectString(System.getenv("LOCKCHECK_SERVERS"))
                .sessionTimeoutMs(ttl)
                .connectionTimeoutMs(ttl)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        zk.start();
        if (!zk.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no ZooKeeper at " + System.getenv("LOCKCHECK_SERVERS"));
        }
        InterProcessMutex mutex = new InterProcessMutex(zk, "/" + System.getenv("LOCKCHECK_KEY"));
        say("\"op\":\"ready\"");
        while (true) {
            String command = hear();
            if (field(command, "op").equals("stop")) {
                zk.close();
                return;
            }
            try {
                if (!mutex.acquire(Long.parseLong(field(command, "wait_ms")), TimeUnit.MILLISECONDS)) {
                    say("\"op\":\"not_acquired\"");
                    continue;
                }
            } catch (Exception e) {
                say("\"op\":\"error\",\"reason\":" + quoted(e));
                continue;
            }
            say("\"op\":\"acquired\"");
            if (!field(command, "probe").equals("true") && access("enter")) {
                Thread.sleep(Long.parseLong(field(command, "hold_ms")));
                access("exit");
            }
            try {
                mutex.release();
                say("\"op\":\"released\"");
            } catch (IllegalMonitorStateException e) {
                say("\"op\":\"lost\",\"reason\":" + quoted(e));
            } catch (Exception e) {
                say("\"op\":\"error\",\"reason\":" + quoted(e));
            }
        }
    }
}
