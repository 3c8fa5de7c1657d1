// Runs several keytool command lines in ONE JVM: each keytool call costs ~0.5 s of JVM start-up,
// and scripts/kafka needs a dozen of them for its throw-away CA, broker and client certificates.
//
//   java --add-exports java.base/sun.security.tools.keytool=ALL-UNNAMED KeytoolBatch.java \
//        -genkeypair ... ';' -exportcert ... ';' ...
//
// Each ';'-separated group is the argument list of one `keytool` call, run by the JDK's own
// keytool (sun.security.tools.keytool.Main.main). keytool itself calls System.exit(1) after
// printing "keytool error: ..." when a command fails, so a failure stops the batch.
import java.util.ArrayList;
import java.util.List;

public class KeytoolBatch {
    public static void main(String[] args) throws Throwable {
        var keytool = Class.forName("sun.security.tools.keytool.Main").getMethod("main", String[].class);
        List<String> cur = new ArrayList<>();
        List<List<String>> calls = new ArrayList<>();
        for (String a : args) {
            if (a.equals(";")) { calls.add(cur); cur = new ArrayList<>(); } else { cur.add(a); }
        }
        if (!cur.isEmpty()) calls.add(cur);
        for (List<String> call : calls) {
            System.out.println("+ keytool " + String.join(" ", call));
            try {
                keytool.invoke(null, (Object) call.toArray(new String[0]));
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause();
            }
        }
    }
}
