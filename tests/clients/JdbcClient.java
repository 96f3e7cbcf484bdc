// pgJDBC client for dpproxy's real-client tests (tests/clients/test_clients.py).
//
// Connects with the connection info in DPP_HOST, DPP_PORT, DPP_USER, DPP_PASSWORD and DPP_DB
// (password authentication: SCRAM-SHA-256 on the servers the tests start), runs a fixed
// scenario on ONE connection and prints ONE JSON object on stdout: for each step its value, or
// {"error": {"sqlstate": ..., "message": ...}}. Compiled and run by the tests with
//   javac -d OUT JdbcClient.java && java -cp OUT:/usr/share/java/postgresql.jar JdbcClient
// No JSON library: the output is written by hand, in ASCII (see quote()).

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

public final class JdbcClient {
    private JdbcClient() {}

    /** One step of the scenario: a value, or an SQLException (turned into {"error": ...}). */
    @FunctionalInterface
    private interface Step {
        Object run() throws SQLException;
    }

    private static final Map<String, Object> RESULT = new LinkedHashMap<>();

    private static boolean step(String name, Step step) {
        try {
            RESULT.put(name, step.run());
            return true;
        } catch (SQLException e) {
            RESULT.put(name, error(e));
            return false;
        } catch (RuntimeException e) {
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("sqlstate", null);
            err.put("message", e.toString());
            Map<String, Object> wrapped = new LinkedHashMap<>();
            wrapped.put("error", err);
            RESULT.put(name, wrapped);
            return false;
        }
    }

    private static Map<String, Object> error(SQLException e) {
        Map<String, Object> err = new LinkedHashMap<>();
        err.put("sqlstate", e.getSQLState());
        err.put("message", e.getMessage());
        Map<String, Object> wrapped = new LinkedHashMap<>();
        wrapped.put("error", err);
        return wrapped;
    }

    private static String env(String name) {
        String value = System.getenv(name);
        if (value == null) {
            throw new IllegalStateException("environment variable " + name + " is not set");
        }
        return value;
    }

    /** All rows of a result set, each a list of column values. */
    private static List<Object> rows(ResultSet rs) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        List<Object> rows = new ArrayList<>();
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            for (int i = 1; i <= md.getColumnCount(); i++) {
                row.add(rs.getObject(i));
            }
            rows.add(row);
        }
        return rows;
    }

    /** The single value of a one-row, one-column result. */
    private static Object scalar(ResultSet rs) throws SQLException {
        if (!rs.next()) {
            throw new SQLException("no row returned", "02000");
        }
        Object value = rs.getObject(1);
        if (rs.next()) {
            throw new SQLException("more than one row returned", "21000");
        }
        return value;
    }

    private static Object query(Connection conn, String sql, boolean one) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            return one ? scalar(rs) : rows(rs);
        }
    }

    public static void main(String[] args) {
        String url = "jdbc:postgresql://" + env("DPP_HOST") + ":" + env("DPP_PORT") + "/"
                + env("DPP_DB");
        Properties props = new Properties();
        props.setProperty("user", env("DPP_USER"));
        props.setProperty("password", env("DPP_PASSWORD"));
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "60");
        props.setProperty("ApplicationName", "dpproxy-jdbc-client-test");

        Connection[] holder = new Connection[1];
        boolean connected = step("connect", () -> {
            holder[0] = DriverManager.getConnection(url, props);
            return Boolean.TRUE;
        });
        if (connected) {
            Connection conn = holder[0];
            try {
                step("driver", () -> {
                    DatabaseMetaData md = conn.getMetaData();
                    return md.getDriverName() + " " + md.getDriverVersion();
                });
                step("select_1", () -> query(conn, "SELECT 1", true));
                step("version", () -> query(conn, "SELECT version()", true));
                step("param_count", () -> {
                    String sql = "SELECT COUNT(*) FROM adult WHERE age > ?";
                    try (PreparedStatement ps = conn.prepareStatement(sql)) {
                        ps.setInt(1, 40);
                        try (ResultSet rs = ps.executeQuery()) {
                            return scalar(rs);
                        }
                    }
                });
                step("grouped", () ->
                        query(conn, "SELECT sex, AVG(age) FROM adult GROUP BY sex", false));
                step("tables", () -> {
                    DatabaseMetaData md = conn.getMetaData();
                    List<Object> names = new ArrayList<>();
                    try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
                        while (rs.next()) {
                            names.add(rs.getString("TABLE_NAME"));
                        }
                    }
                    return names;
                });
                step("columns", () -> {
                    DatabaseMetaData md = conn.getMetaData();
                    List<Object> columns = new ArrayList<>();
                    try (ResultSet rs = md.getColumns(null, "public", "adult", "%")) {
                        while (rs.next()) {
                            List<Object> column = new ArrayList<>();
                            column.add(rs.getString("COLUMN_NAME"));
                            column.add(rs.getString("TYPE_NAME"));
                            columns.add(column);
                        }
                    }
                    return columns;
                });
                step("refused", () -> query(conn, "SELECT * FROM adult LIMIT 5", false));
                step("after_refusal", () -> query(conn, "SELECT COUNT(*) FROM adult", true));
            } finally {
                try {
                    conn.close();
                } catch (SQLException e) {
                    RESULT.put("close", error(e));
                }
            }
        }
        System.out.println(json(RESULT));
    }

    // ---------------------------------------------------------------------------------- JSON

    private static String json(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        return out.toString();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Boolean) {
            out.append(value.toString());
        } else if (value instanceof BigDecimal) {
            out.append(((BigDecimal) value).toPlainString());
        } else if (value instanceof Double || value instanceof Float) {
            double d = ((Number) value).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                quote(out, value.toString()); // JSON has no NaN or Infinity
            } else {
                out.append(value.toString());
            }
        } else if (value instanceof Number) {
            out.append(value.toString()); // Integer, Long, Short, BigInteger
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                quote(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof List) {
            out.append('[');
            boolean first = true;
            for (Object item : (List<?>) value) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                write(out, item);
            }
            out.append(']');
        } else {
            quote(out, value.toString());
        }
    }

    /** A JSON string literal: quotes, backslashes and every control character escaped. */
    private static void quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                case '\b':
                    out.append("\\b");
                    break;
                case '\f':
                    out.append("\\f");
                    break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        // ASCII-only output, whatever the platform encoding of System.out;
                        // a surrogate pair becomes two escapes, as JSON allows
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
